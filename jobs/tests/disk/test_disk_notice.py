"""What the household hears when a result waits for disk space, and what the job's story and page say."""

from __future__ import annotations

import errno

import pytest

from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def house():
    from notify.services import channel_create

    return channel_create(owner=None, kind="email", name="Box", address="box@example.org")


def test_a_wait_for_disk_tells_the_household_once_and_says_what_to_do(
    house, member, device, django_capture_on_commit_callbacks, settings, tmp_path
):
    from jobs.queue.outcomes import wait_for_disk
    from notify.models import Delivery
    from notify.services import build_message, channel_create

    settings.MEDIA_ROOT = tmp_path
    mine = channel_create(owner=member, kind="email", name="Me", address="me@example.org")
    job = make_job(member, device, state="collecting", remote_id="v1")
    full = OSError(errno.ENOSPC, "No space left on device")
    with django_capture_on_commit_callbacks(execute=True):
        wait_for_disk(job, full)
        wait_for_disk(job, full)  # the next try finds it still full: no second notice
    told = Delivery.objects.get()
    assert told.channel == house and told.event == "disk.full"  # the household's, never the owner's own
    assert not Delivery.objects.filter(channel=mine).exists()
    message = build_message(told)
    assert message.title == "The hub's disk is full" and message.path == "/health/"
    assert device.name in message.body and "free" in message.body and "Usage page" in message.body
    assert "red fox" not in message.body  # the household never reads a person's prompt

    job.refresh_from_db()
    assert job.state == "collecting" and job.remote_data["waiting_for_disk"]
    notes = list(
        job.events.filter(message__startswith="Waiting for disk space").values_list("data", flat=True)
    )
    assert len(notes) == 1 and notes[0]["code"] == "disk_full" and notes[0]["errno"] == errno.ENOSPC


def test_the_job_page_says_the_device_still_holds_the_result(
    member, member_client, device, settings, tmp_path
):
    from jobs.queue.outcomes import wait_for_disk

    settings.MEDIA_ROOT = tmp_path
    job = make_job(member, device, state="collecting", remote_id="v1")
    wait_for_disk(job, OSError(errno.ENOSPC, "No space left on device"))
    page = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Waiting for disk space:" in page and "the device still holds the result" in page
    assert f'id="job-{job.pk}-waiting-disk"' in page and 'href="/usage/"' in page
