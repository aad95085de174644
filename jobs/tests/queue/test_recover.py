"""``jobs.queue.engine.recover``: a blocking or stream job whose worker died, as reconcile hands it over."""

from __future__ import annotations

import pytest

from jobs.queue import engine, enqueue
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    out: list[tuple[str, tuple]] = []
    monkeypatch.setattr(enqueue, "send", lambda task, *args, **options: out.append((task, args)))
    monkeypatch.setattr(enqueue, "send_on_commit", lambda task, *args, **options: out.append((task, args)))
    return out


def test_a_blocking_job_killed_after_saving_its_result_is_finished_not_rendered_again(member, device):
    """The worker died between "Saved the result" (collecting) and "Done": the file is kept, the job is done."""
    job = make_job(member, device, kind="image", state="collecting")

    engine.recover(job.pk)

    job.refresh_from_db()
    assert job.state == "done"
    assert not job.events.filter(state="interrupted").exists()
    assert any("after saving the result" in e.message for e in job.events.all())


def test_a_blocking_job_killed_mid_call_is_interrupted_and_tried_again(member, device):
    """The call died with its worker: nothing was saved, so the render is asked for again (retried once)."""
    job = make_job(member, device, kind="image", state="running")

    engine.recover(job.pk)

    states = [e.state for e in job.events.order_by("seq")]
    assert "interrupted" in states and states.index("interrupted") < len(states) - 1
    assert "done" not in states
