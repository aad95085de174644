"""One way in: a submission plans each candidate device once, whatever door it came through.

A small counting wrapper around the device's scheduling facts (``snapshot_for``), the plan (``eta.plan``) and the
kind's form: a pinned job, a pool job, a batch of 20, a three-step chain and a run again must not multiply them
(issue 35, "one way in"). No worker runs; the after-commit replan is not part of the submission (it is the plan written).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.test import Client

from hub.accounts.tokens import token_create
from jobs.core import scheduler
from jobs.kinds.forms import JobForm
from jobs.queue import enqueue, eta
from jobs.tests.ui_fixtures import IMAGE, VIDEO, another_tiiny, capabilities

pytestmark = pytest.mark.django_db

VIDEO_FIELDS = {"model": VIDEO, "prompt": "a fox in the snow", "size": "832x480", "seconds": 2, "steps": 4}
#: The forms a REST body builds per device it is checked on (``api._validated``, ``with_defaults``, the bound one).
FORMS_REST = 3
IMAGE_FIELDS = {"model": IMAGE, "prompt": "a lighthouse at dusk", "size": "512x512", "steps": 8}


class Counts:
    def __init__(self) -> None:
        self.snapshots: Counter[int] = Counter()
        self.plans: Counter[int] = Counter()
        self.forms: Counter[int] = Counter()

    def reset(self) -> None:
        self.snapshots.clear()
        self.plans.clear()
        self.forms.clear()


@pytest.fixture
def counts(monkeypatch, settings):
    settings.HUB_API_SUBMIT_RATE = "0"
    monkeypatch.setattr(enqueue, "send", lambda *a, **kw: None)
    c = Counts()
    real_snapshot, real_plan, real_init = scheduler.snapshot_for, eta.plan, JobForm.__init__

    def snapshot_for(device_id, **kw):
        c.snapshots[device_id] += 1
        return real_snapshot(device_id, **kw)

    def plan(device_id, **kw):
        c.plans[device_id] += 1
        return real_plan(device_id, **kw)

    def init(self, *a, **kw):
        if kw.get("device") is not None:
            c.forms[kw["device"].pk] += 1
        real_init(self, *a, **kw)

    import jobs.queue.admission as admission
    import jobs.queue.chains as chains
    import jobs.queue.services as services

    for module in (scheduler, eta, admission, services, chains):
        monkeypatch.setattr(module, "snapshot_for", snapshot_for, raising=False)
    monkeypatch.setattr(eta, "plan", plan)
    monkeypatch.setattr(JobForm, "__init__", init)
    return c


@pytest.fixture
def home(db):
    return another_tiiny("Home", capabilities(), loaded=(VIDEO,))


@pytest.fixture
def office(db, home):
    return another_tiiny("Office", capabilities())


def _bearer(user) -> Client:
    raw = token_create(user=user, name="script", scopes=["read", "submit"])[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _post(client, path, body):
    return client.post(path, json.dumps(body), content_type="application/json")


def _report(name: str, c: Counts, jobs: int) -> None:
    print(f"{name}: jobs={jobs} plans={dict(c.plans)} snapshots={dict(c.snapshots)} forms={dict(c.forms)}")


def test_a_pinned_submission_plans_its_device_once(member, home, counts):
    counts.reset()
    response = _post(_bearer(member), "/api/jobs", {"device": home.pk, "kind": "video", **VIDEO_FIELDS})
    assert response.status_code == 201, response.content
    _report("pinned", counts, 1)
    assert dict(counts.plans) == {home.pk: 1}
    assert dict(counts.snapshots) == {home.pk: 1}
    # REST's forms for one device: its fields' names, its defaults for the model, the bound one (was 4)
    assert dict(counts.forms) == {home.pk: FORMS_REST}


def test_a_pool_submission_plans_each_candidate_once(member, home, office, counts):
    counts.reset()
    response = _post(_bearer(member), "/api/jobs", {"kind": "video", **VIDEO_FIELDS})
    assert response.status_code == 201, response.content
    _report("pool", counts, 1)
    assert dict(counts.plans) == {home.pk: 1, office.pk: 1}
    assert dict(counts.snapshots) == {home.pk: 1, office.pk: 1}
    assert dict(counts.forms) == {home.pk: FORMS_REST, office.pk: FORMS_REST}


def test_a_batch_of_20_plans_each_member_once(member, home, counts):
    counts.reset()
    jobs = [{"device": home.pk, "kind": "video", **VIDEO_FIELDS, "prompt": f"fox {i}"} for i in range(20)]
    response = _post(_bearer(member), "/api/jobs/batch", {"jobs": jobs})
    assert response.status_code == 201, response.content
    _report("batch of 20", counts, 20)
    assert dict(counts.plans) == {home.pk: 20}
    assert dict(counts.snapshots) == {home.pk: 20}
    assert dict(counts.forms) == {home.pk: 20 * FORMS_REST}


def test_a_three_step_chain_plans_each_step_once(member, home, counts):
    from jobs.doors.chaining import ChainStep, StepRef, submit_chain

    counts.reset()
    steps = [
        ChainStep("image", IMAGE_FIELDS, device=home),
        ChainStep("video", VIDEO_FIELDS, {"start_image": StepRef(0)}, device=home),
        ChainStep("mesh", {"model": "tencent/Hunyuan3D-2.1"}, {"image": StepRef(0)}, device=home),
    ]
    queued = submit_chain(owner=member, steps=steps)
    assert len(queued.jobs) == 3
    _report("chain of 3", counts, 3)
    assert dict(counts.plans) == {home.pk: 3}
    assert dict(counts.snapshots) == {home.pk: 3}
    assert dict(counts.forms) == {
        home.pk: 3 * 2
    }  # each step: its defaults for the model, the bound one (was 3)


def _again(client, job_id, body=None):
    return _post(client, f"/api/jobs/{job_id}/again", body or {})


def test_a_pinned_run_again_plans_its_device_once(member, home, counts):
    client = _bearer(member)
    first = _post(client, "/api/jobs", {"device": home.pk, "kind": "video", **VIDEO_FIELDS}).json()
    counts.reset()
    response = _again(client, first["id"], {"steps": 6})
    assert response.status_code == 201, response.content
    _report("run again, pinned", counts, 1)
    assert dict(counts.plans) == {home.pk: 1}
    assert dict(counts.snapshots) == {home.pk: 1}


def test_a_pool_run_again_plans_each_candidate_once(member, home, office, counts):
    client = _bearer(member)
    first = _post(client, "/api/jobs", {"kind": "video", **VIDEO_FIELDS}).json()
    counts.reset()
    response = _again(client, first["id"])
    assert response.status_code == 201, response.content
    _report("run again, pool", counts, 1)
    assert dict(counts.plans) == {home.pk: 1, office.pk: 1}
    assert dict(counts.snapshots) == {home.pk: 1, office.pk: 1}


def test_a_chained_job_run_again_keeps_its_parent_link(member, home, counts):
    from jobs.doors.chaining import ChainStep, StepRef, submit_chain
    from jobs.models import JobLink, JobState

    steps = [
        ChainStep("image", IMAGE_FIELDS, device=home),
        ChainStep("video", VIDEO_FIELDS, {"start_image": StepRef(0)}, device=home),
    ]
    parent, child = submit_chain(owner=member, steps=steps).jobs
    counts.reset()
    response = _again(_bearer(member), child.pk, {"steps": 6})
    assert response.status_code == 201, response.content
    _report("run again, chained", counts, 1)
    assert dict(counts.plans) == {home.pk: 1}
    assert dict(counts.snapshots) == {home.pk: 1}
    new = response.json()["id"]
    link = JobLink.objects.get(child_id=new)
    assert (link.parent_id, link.field) == (parent.pk, "start_image")
    assert response.json()["state"] == JobState.HELD  # it waits for the parent's image, as the job it repeats
