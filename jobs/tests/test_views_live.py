"""The websocket topics the pages ask for: who may join, and what the (re)connect snapshot holds."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from hub import live
from jobs.broadcast import job_groups
from jobs.live import job_topic, mine_topic, queue_topic
from jobs.tests.ui_fixtures import *  # noqa: F403
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def test_the_job_topic_is_for_people_who_may_see_the_job(member, other_member, admin_user, device):
    job = make_job(member, device, state="running", prompt="a private fox")
    groups, snapshot = job_topic(member, str(job.pk))
    assert groups == [live.job_group(job.pk)]
    assert any(f'id="job-{job.pk}-status"' in html and 'value="37"' in html for html in snapshot)
    assert job_topic(admin_user, str(job.pk))[0] == [live.job_group(job.pk)]
    with pytest.raises(PermissionDenied):
        job_topic(other_member, str(job.pk))


def test_the_queue_topic_gives_controls_to_admins_only(member, admin_user, device):
    make_job(member, device, prompt="a private fox")
    _, snapshot = queue_topic(member, str(device.pk))
    assert not any("queue-admin" in html for html in snapshot)
    assert not any("a private fox" in html for html in snapshot)
    _, admin_snapshot = queue_topic(admin_user, str(device.pk))
    assert any(f'id="device-{device.pk}-queue-admin"' in html for html in admin_snapshot)


def test_the_mine_topic_only_takes_your_own_id(member, other_member, device):
    job = make_job(member, device, state="running")
    groups, rows = mine_topic(member, str(member.pk))
    assert groups == [live.user_group(member.pk)] and f'id="job-{job.pk}-row"' in rows[0]
    with pytest.raises(PermissionDenied):
        mine_topic(other_member, str(member.pk))


def test_private_job_fragments_go_only_to_people_who_may_see_them(member, device):
    private = make_job(member, device)
    shared = make_job(member, device, shared=True)
    assert live.EVERYONE not in job_groups(private) and live.device_group(device.pk) not in job_groups(
        private
    )
    assert live.EVERYONE in job_groups(shared)


@pytest.mark.django_db(transaction=True)
def test_a_private_jobs_prompt_never_reaches_another_persons_socket(member, other_member, device):
    """Over the real Redis channel layer: the other person watches the queue and the device while a private
    job of mine moves; they get the public running card, never my prompt."""
    from channels.testing import WebsocketCommunicator

    from hub.consumers import HubConsumer
    from hub.testing import run_async
    from jobs.broadcast import broadcast_job, broadcast_queue

    job = make_job(member, device, state="running", prompt="my secret birthday surprise")

    async def scenario(user, watch: str) -> list[str]:
        from asgiref.sync import sync_to_async

        communicator = WebsocketCommunicator(HubConsumer.as_asgi(), f"/ws/hub/?watch={watch}")
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        assert connected
        received = []
        while not await communicator.receive_nothing(timeout=0.3):  # the snapshot
            received.append(await communicator.receive_from())
        await sync_to_async(broadcast_job)(job.pk)
        await sync_to_async(broadcast_queue)(device.pk)
        while not await communicator.receive_nothing(timeout=0.5):
            received.append(await communicator.receive_from())
        await communicator.disconnect()
        return received

    theirs = run_async(scenario, other_member, f"queue:{device.pk},device:{device.pk},job:{job.pk}")
    assert any(f'id="device-{device.pk}-running"' in html for html in theirs)  # they see the bar move
    assert not any("my secret birthday surprise" in html for html in theirs)
    mine = run_async(scenario, member, f"job:{job.pk}")
    assert any("my secret birthday surprise" in html for html in mine)
