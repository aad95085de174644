"""Which devices a job waiting for "any device" may run on (``Job.pool``), kept current as the devices change.

At submit, a job's pool is every device whose form and admission take exactly its request: the same model and
parameters (``jobs.queue.submission.check_pool``). Devices change while jobs wait: one is added (its first report of
what it can do comes with its first poll), a model is installed on one, or removed. So when a device reports
capabilities that differ from the ones stored (``devices.hooks.device_capabilities_changed``), each waiting pool
job is checked against it the same way: its kind's form on that device, filled in with the job's settings, must
give back exactly the job's request, within the kind's limits there. A device that now can joins the job's pool;
one that no longer can leaves it (unless it is the last device of the pool: the job then waits there, as a pinned
job would). Each change is told in the job's story, and the pool then moves the jobs to their lanes
(``jobs.queue.pool.rebalance_and_wake``): ten jobs waiting on one Tiiny spread to the second one the moment it is
added.

Quotas are the person's, across devices: a job already admitted is not admitted again.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from devices.models import Device
from hub.accounts.groups import allowance_for
from jobs.core.transitions import job_note
from jobs.kinds.table import form_class_for, kinds_for
from jobs.models import PENDING_STATES, Job, When
from jobs.queue.admission import limit_refusal


def takes(device: Device, job: Job) -> bool:
    """Whether ``device`` can run exactly ``job``'s request: its form for the job's kind, filled in with the job's
    settings, is valid there and gives back the same model and parameters, within the kind's limits there. The
    job's input files are kept (``params["files"]``), so the form's file fields are not asked for again. A job
    queued by a token bound to devices never takes in one outside them (``Job.devices_allowed``)."""
    if job.devices_allowed is not None and device.pk not in job.devices_allowed:
        return False
    if job.kind not in kinds_for(device) or not allowance_for(job.owner).device_ok(device.pk):
        return False  # (a device the owner's groups don't allow never joins: ``hub.accounts.groups``)
    form_class = form_class_for(device.kind, job.kind)
    params = {k: v for k, v in (job.params or {}).items() if k != "files"}
    # When it may start is the job's, not the device's: it is not checked again.
    data = {**form_class.fields_from_job(job), "when": When.ASAP}
    form = form_class(data, None, device=device, user=job.owner).keep_files()
    if not form.is_valid():
        return False
    if (form.cleaned_data["model"], form.cleaned_params()) != (job.model_id, params):
        return False
    return limit_refusal(device=device, kind=job.kind, model_id=job.model_id, params=params) is None


def refit(device_id: int) -> set[int]:
    """Each waiting pool job's pool, with ``device_id`` in or out as it can or can't run the job now. Returns the
    jobs whose pool changed."""
    device = Device.objects.filter(pk=device_id).first()
    if device is None:
        return set()
    changed: set[int] = set()
    waiting = (
        Job.objects.filter(state__in=PENDING_STATES, pinned=False).select_related("owner").order_by("pk")
    )
    for job in waiting:
        # The job's request never changes: only its pool is read again, under its lock.
        can = takes(device, job)
        if can != (device.pk in pool_of(job)) and _refit_one(job.pk, device, can=can):
            changed.add(job.pk)
    return changed


def pool_of(job: Any) -> list[int]:
    """The devices a pool job may run on: its pool (the device it waits on for one stored without)."""
    return list(dict.fromkeys(job.pool or [job.device_id]))


def _refit_one(job_id: int, device: Device, *, can: bool) -> bool:
    """One job's pool with ``device`` in (``can``) or out, read and written under the row's lock (two devices'
    changes at once each see the other's)."""
    with transaction.atomic():
        job = (
            Job.objects.select_for_update().filter(pk=job_id, state__in=PENDING_STATES, pinned=False).first()
        )
        if job is None:
            return False
        pool = pool_of(job)
        if can == (device.pk in pool):
            return False
        if can:
            new = sorted({*pool, device.pk})
            message = f"{device.name} can run it now too: it may run there."
        else:
            new = [pk for pk in pool if pk != device.pk]
            if not new:
                return False  # the last device it may run on: it waits there (and says why when it runs)
            message = f"{device.name} can no longer run it (what the device reports changed)."
        return job_note(job.pk, message, data={"pool": new}, pool=new)
