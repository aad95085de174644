"""The websocket topics the pages ask for: who may join, and what the (re)connect snapshot holds."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from hub import live
from jobs.live.topics import job_topic, mine_topic, plan_topic, queue_topic
from jobs.tests.ui_fixtures import hold_device, make_job

pytestmark = pytest.mark.django_db


def test_the_job_topic_is_for_people_who_may_see_the_job(member, other_member, admin_user, device):
    job = make_job(member, device, state="running", prompt="a private fox")
    groups, snapshot = job_topic(member, str(job.pk))
    assert groups == [live.job_group(job.pk)]
    assert any(f'id="job-{job.pk}-status"' in html and 'value="37"' in html for html in snapshot)
    assert job_topic(admin_user, str(job.pk))[0] == [live.job_group(job.pk)]
    with pytest.raises(PermissionDenied):
        job_topic(other_member, str(job.pk))


def test_the_plan_topic_names_a_job_by_its_prompt_only_for_who_may_see_it_and_the_queue_topic_adds_controls(
    member, other_member, viewer, admin_user, device
):
    make_job(member, device, prompt="a private fox")
    make_job(other_member, device, state="running", prompt="otto's secret render")
    for person in (member, other_member, viewer, admin_user):  # the dashboard's and new-job page's
        groups, snapshot = plan_topic(person, str(device.pk))
        assert groups == [live.queue_group(device.pk)]
        assert (
            f'id="device-{device.pk}-running"' in snapshot[0]
            and f'id="device-{device.pk}-queue"' in snapshot[1]
        )
        assert not any("queue-admin" in html for html in snapshot)
        # The owner's own entry by its prompt (admins see every prompt), others' as "Video by ...".
        assert ("a private fox" in snapshot[1]) == (person in (member, admin_user)), person
        assert ("Video by mia" in snapshot[1]) == (person not in (member, admin_user)), person
        assert ("otto&#x27;s secret render" in snapshot[0]) == (person in (other_member, admin_user)), person
    groups, snapshot = queue_topic(member, str(device.pk))  # the queue page of a member: no controls
    assert groups == [live.queue_group(device.pk)] and len(snapshot) == 2
    groups, admin_snapshot = queue_topic(admin_user, str(device.pk))
    assert groups == [live.queue_group(device.pk), live.control_group(device.pk)]
    assert (
        f'id="device-{device.pk}-queue-admin"' in admin_snapshot[2] and "a private fox" in admin_snapshot[2]
    )


def test_the_mine_topic_is_your_recent_jobs_list_and_only_takes_your_own_id(member, other_member, device):
    job = make_job(member, device, state="running")
    groups, snapshot = mine_topic(member, str(member.pk))
    assert groups == [live.mine_group(member.pk)] and len(snapshot) == 1
    assert 'id="my-jobs-box"' in snapshot[0] and f'id="job-{job.pk}-row"' in snapshot[0]
    with pytest.raises(PermissionDenied):
        mine_topic(other_member, str(member.pk))


def test_job_fragments_go_only_to_topic_groups_with_the_jobs_audience(member, device, monkeypatch):
    """What ``broadcast_job`` sends where: the job's page elements to ``job.<id>`` for the job's audience, its
    owner's list (or row) to ``mine.<owner>`` for the owner; a state change sends nothing else."""
    from jobs.live.broadcast import broadcast_job, job_audience

    private = make_job(member, device)
    shared = make_job(member, device, shared=True)
    assert live.EVERYONE not in job_audience(private) and live.EVERYONE in job_audience(shared)
    sent: list[tuple[str, tuple[str, ...], bool]] = []

    def push(group, html, *, audience=None, variant=False, **kw):
        sent.append((group, tuple(audience or ()), variant))
        return True

    monkeypatch.setattr(live, "watched", lambda topics: set(topics))  # every topic has a page open
    monkeypatch.setattr(live, "push", push)
    broadcast_job(private.pk)
    page, mine = live.job_group(private.pk), live.mine_group(member.pk)
    assert {group for group, _, _ in sent} == {page, mine}
    assert {a for g, a, variant in sent if g == page and not variant} == {tuple(job_audience(private))}
    assert {a for g, a, _ in sent if g == mine} == {(live.user_group(member.pk),)}


@pytest.mark.django_db(transaction=True)
def test_a_private_jobs_prompt_never_reaches_another_persons_socket(member, other_member, device):
    """Over the real Redis channel layer: the other person watches the queue and the device while a private
    job of mine moves; they get the public running card, never my prompt."""
    from channels.testing import WebsocketCommunicator

    from hub.consumers import HubConsumer
    from hub.testing import run_async
    from jobs.live.broadcast import broadcast_job, broadcast_queue

    job = make_job(member, device, state="running", prompt="my secret birthday surprise")
    hold_device(device)  # the session's beat (if running) neither recovers the row nor polls the device

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
