"""A device that is away, at the pool's unit level: where a job for "any device" waits when it is queued."""

from __future__ import annotations

import pytest

from devices.models import Device
from jobs.queue import admission, services
from jobs.tests.ui_fixtures import VIDEO, another_tiiny, make_job

pytestmark = pytest.mark.django_db

SHORT = {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}


@pytest.mark.parametrize("away", ["unreachable", "locked", "paused"])
def test_a_job_for_any_device_queued_while_one_is_away_waits_where_it_can_start(member, device, away):
    office = another_tiiny("Office")
    make_job(member, office, state="running")  # Office is busy: the idle device's plan would be ready first
    if away == "paused":
        Device.objects.filter(pk=device.pk).update(queue_paused=True)
    else:
        Device.objects.filter(pk=device.pk).update(state=away)

    job = services.job_submit(
        owner=member, device=device, kind="video", model_id=VIDEO, params=SHORT, pool=[device, office]
    )

    # Not in the away device's lane, shown with times that device's plan gives as if it were there.
    assert job.device_id == office.pk and sorted(job.pool) == sorted([device.pk, office.pk])
    checked = admission.admit(owner=member, device=device, kind="video", model_id=VIDEO, params=SHORT)
    assert checked.blocked and not checked.refused  # it may still be queued there (pinned)


def test_with_every_device_there_a_job_for_any_device_waits_where_it_is_ready_first(member, device):
    office = another_tiiny("Office")
    make_job(member, office, state="running")
    job = services.job_submit(
        owner=member, device=office, kind="video", model_id=VIDEO, params=SHORT, pool=[office, device]
    )
    assert job.device_id == device.pk
    assert not admission.admit(
        owner=member, device=device, kind="video", model_id=VIDEO, params=SHORT
    ).blocked
