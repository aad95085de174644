"""The live feed is one quiet, correct path: topics a page shows, one sender after commit, no repeats.

Over the run's real Redis channel layer: a "tap" records every ``group_send`` the hub makes to some groups
(what the layer carries), a socket is the real consumer (what a page receives).
"""

from __future__ import annotations

import re
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from hub import live
from hub.testing import run_async
from jobs.tests.ui_fixtures import add_artifact, hold_device, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(autouse=True)
def _no_background_work(device):
    """What each test counts is its own: the session's beat (if running) neither polls, dispatches nor
    recovers on this device, so it pushes nothing of its own into these groups or their Redis memory."""
    hold_device(device)


QUIET_S = 0.4


class Tap:
    """Every message the hub hands the channel layer for some groups (it still goes out)."""

    def __init__(self, monkeypatch, *groups: str) -> None:
        self.groups, self.seen = set(groups), []
        send = live._send

        def spy(group, message):
            if group in self.groups:
                self.seen.append(message)
            send(group, message)

        monkeypatch.setattr(live, "_send", spy)
        live.forget_sent(groups)  # as a joining socket does

    def messages(self) -> list[dict]:
        out, self.seen = self.seen, []
        return out

    def ids(self) -> list[str]:
        return [live.element_id(m["html"]) for m in self.messages() if m["type"] == "hub.fragment"]

    def versions(self) -> list[tuple[str, tuple[str, ...]]]:
        """(element id, audience) of each fragment, sorted: an element sent in several versions counts once each."""
        return sorted(
            (live.element_id(m["html"]), tuple(m.get("audience") or ()))
            for m in self.messages()
            if m["type"] == "hub.fragment"
        )


def plan_versions(element: str, *owners) -> list[tuple[str, tuple[str, ...]]]:
    """A plan element in its versions (``jobs.live.broadcast.plan_variants``): everyone else's, the admins', and one
    per person with a private job on the device."""
    return sorted(
        [(element, ()), (element, (live.ADMINS,)), *((element, (live.user_group(o.pk),)) for o in owners)]
    )


async def _socket(user, watch: str) -> tuple[WebsocketCommunicator, list[str]]:
    from hub.consumers import HubConsumer

    comm = WebsocketCommunicator(HubConsumer.as_asgi(), f"/ws/hub/?watch={watch}")
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected
    return comm, await _drain(comm)


async def _drain(comm: WebsocketCommunicator) -> list[str]:
    out = []
    while not await comm.receive_nothing(timeout=QUIET_S):
        out.append(await comm.receive_from())
    return out


# -- one sender, once ------------------------------------------------------------------------------------------
def test_one_state_change_sends_the_queue_exactly_once(member, device, monkeypatch):
    from jobs.queue.services import job_cancel

    job = make_job(member, device)
    make_job(member, device, prompt="the next one")
    live.mark_watched(f"plan:{device.pk}")
    tap = Tap(monkeypatch, live.queue_group(device.pk))
    job_cancel(job=job, by=member, reason="changed my mind")  # a transition plus the service's own replan
    sent = [v for v in tap.versions() if v[0] == f"device-{device.pk}-queue"]
    assert sent == plan_versions(f"device-{device.pk}-queue", member), sent  # once (in each version)


def test_the_planner_and_the_engine_send_nothing_themselves(member, device, monkeypatch):
    """plan_device stores predictions and tells the one sender; a replan that changes nothing sends nothing."""
    from jobs.queue.eta import plan_device

    make_job(member, device)
    live.mark_watched(f"plan:{device.pk}")
    plan_device(device.pk)  # whatever it changed goes out once
    tap = Tap(monkeypatch, live.queue_group(device.pk))
    plan_device(device.pk)
    first = tap.versions()
    plan_device(device.pk)
    assert first == sorted(
        plan_versions(f"device-{device.pk}-running", member)
        + plan_versions(f"device-{device.pk}-queue", member)
    )  # after a join: the truth once (in each version)
    assert tap.ids() == []  # the same plan again: nothing


def test_when_the_people_with_private_entries_change_the_everyone_version_goes_out_again(
    member, device, monkeypatch
):
    """The plan went to everyone ("empty"), then to Mia in her own version (her job, excluded from everyone's),
    then her job left: the everyone version is "empty" again, the same HTML everyone else got first, and it
    must still go out, or Mia's page keeps showing her cancelled job."""
    from jobs.core.transitions import job_transition
    from jobs.live.broadcast import broadcast_queue

    live.mark_watched(f"plan:{device.pk}")
    tap = Tap(monkeypatch, live.queue_group(device.pk))
    broadcast_queue(device.pk)
    queue = f"device-{device.pk}-queue"
    assert [v for v in tap.versions() if v[0] == queue] == [(queue, ())]
    job = make_job(member, device, prompt="mia's fleeting idea")
    broadcast_queue(device.pk)
    assert [v for v in tap.versions() if v[0] == queue] == plan_versions(queue, member)
    job_transition(job.pk, from_states=["queued"], to="cancelled", message="Cancelled.")
    sent = [m for m in tap.messages() if live.element_id(m["html"]) == queue]
    assert len(sent) == 1 and "audience" not in sent[0] and "exclude" not in sent[0], sent
    assert "The queue is empty" in sent[0]["html"]  # to everyone, Mia included


def test_a_progress_tick_moves_status_row_and_bar_at_most_once_a_second(member, device, monkeypatch):
    from jobs.core.changes import job_ticked
    from jobs.core.transitions import job_set

    class Clock:  # the throttle's clock, held still: a loaded machine must not turn "within the second" into two
        now = time.time()

        @classmethod
        def time(cls) -> float:
            return cls.now

    monkeypatch.setattr(live, "time", Clock)
    # The cards' times held still too: "ready ≈ 19:06" moves to 19:07 when the real clock crosses a minute between
    # two ticks, and that is a change worth sending (CI's SQLite pass once crossed one here).
    frozen = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: frozen)
    job = make_job(member, device, state="running")
    for topic in (f"job:{job.pk}", f"plan:{device.pk}", f"mine:{member.pk}"):
        live.mark_watched(topic)
    tap = Tap(monkeypatch, live.job_group(job.pk), live.queue_group(device.pk), live.mine_group(member.pk))
    moved = sorted(
        [f"job-{job.pk}-status", f"job-{job.pk}-row"] + [f"device-{device.pk}-running"] * 3
    )  # the running card in its versions: everyone else's, the admins', the owner's (a private job)
    job_set(job.pk, progress=40.0)
    job_ticked(job.pk)
    assert sorted(tap.ids()) == moved  # no events, result or actions: a tick moves only what moved
    job_set(job.pk, progress=41.0)
    job_ticked(job.pk)
    assert tap.ids() == []  # within the second: held back (the next tick carries it)
    Clock.now += 1.0
    job_ticked(job.pk)
    assert sorted(tap.ids()) == moved
    Clock.now += 1.0
    job_ticked(job.pk)
    assert tap.ids() == []  # nothing changed: nothing sent


def test_the_dashboard_list_comes_whole_when_a_job_joins_it_and_by_row_after(member, device, monkeypatch):
    from django.core.cache import cache

    from jobs.core.transitions import job_transition

    cache.delete(f"live:mine-ids:{member.pk}")
    job = make_job(member, device)
    live.mark_watched(f"mine:{member.pk}")
    tap = Tap(monkeypatch, live.mine_group(member.pk))
    job_transition(job.pk, from_states=["queued"], to="preparing", message="Loading the model.")
    assert tap.ids() == ["my-jobs-box"]
    job_transition(job.pk, from_states=["preparing"], to="running", message="Rendering.")
    assert tap.ids() == [f"job-{job.pk}-row"]  # the same jobs on the list: only the row moved
    newer = make_job(member, device, prompt="a newer one")
    job_transition(newer.pk, from_states=["queued"], to="cancelled", message="Cancelled.")
    assert tap.ids() == ["my-jobs-box"]


def test_nothing_is_rendered_for_topics_nobody_watches(member, device, monkeypatch):
    from django.core.cache import cache

    from jobs.core.transitions import job_note
    from jobs.live import fragments

    job = make_job(member, device, state="running")
    topics = (f"job:{job.pk}", f"mine:{member.pk}", f"plan:{device.pk}", f"queue:{device.pk}")
    cache.delete_many([live.watch_key(t) for t in topics])
    rendered = []
    monkeypatch.setattr(fragments, "job_context", lambda *a, **k: rendered.append(1) or {})
    job_note(job.pk, "Nobody is looking.")
    assert rendered == []


# -- the player stays ------------------------------------------------------------------------------------------
def test_a_finished_jobs_player_goes_out_once_with_the_move_to_done(member, device, media, monkeypatch):
    from jobs.core.transitions import job_note, job_transition

    job = make_job(member, device, state="collecting")
    add_artifact(job, media)
    live.mark_watched(f"job:{job.pk}")
    tap = Tap(monkeypatch, live.job_group(job.pk))
    job_transition(job.pk, from_states=["collecting"], to="done", message="Done.", progress=100.0)
    results = [m["html"] for m in tap.messages() if f'id="job-{job.pk}-result"' in m["html"][:200]]
    assert len(results) == 1 and "<video" in results[0]
    job_note(job.pk, "Shared with the household.", shared=True)
    later = tap.messages()
    assert later and not any(
        "<video" in m["html"] or "-result" in (live.element_id(m["html"]) or "") for m in later
    )


def test_the_snapshot_of_a_finished_job_leaves_its_player_alone(member, device, media):
    from jobs.live.topics import job_topic

    job = make_job(member, device, state="done")
    add_artifact(job, media)
    _, snapshot = job_topic(member, str(job.pk))
    assert snapshot and not any("<video" in html for html in snapshot)
    assert any(f'id="job-{job.pk}-status"' in html for html in snapshot)


# -- the actions box and the header ------------------------------------------------------------------------------
def test_the_actions_box_follows_the_state_by_push_for_everyone_who_may_act(
    admin_user, member, other_member, viewer, device
):
    from jobs.core.transitions import job_transition

    job = make_job(member, device, state="running", shared=True)

    async def scenario():
        sockets = {}
        for name, user in [
            ("owner", member),
            ("admin", admin_user),
            ("other", other_member),
            ("viewer", viewer),
        ]:
            sockets[name], _ = await _socket(user, f"job:{job.pk}")
        await sync_to_async(job_transition)(
            job.pk, from_states=["running"], to="failed", message="The device said no.", error_human="no"
        )
        got = {name: await _drain(comm) for name, comm in sockets.items()}
        for comm in sockets.values():
            await comm.disconnect()
        return got

    got = run_async(scenario)
    boxes = {
        name: [t for t in texts if f'id="job-{job.pk}-buttons"' in t[:200]] for name, texts in got.items()
    }
    assert all(len(b) == 1 for b in boxes.values()), boxes  # each gets exactly its own version
    for name in ("owner", "admin"):  # rights to act: retry now (it failed), no cancel any more
        assert 'id="job-retry"' in boxes[name][0] and f'id="cancel-{job.pk}"' not in boxes[name][0]
        assert 'data-can-retry="1"' in boxes[name][0] and 'data-can-cancel="0"' in boxes[name][0]
    assert 'id="job-retry"' not in boxes["other"][0] and 'id="job-again"' in boxes["other"][0]
    assert 'id="job-retry"' not in boxes["viewer"][0] and 'id="job-again"' not in boxes["viewer"][0]
    assert all(any(f'id="job-{job.pk}-status"' in t for t in texts) for texts in got.values())


def test_sharing_updates_the_job_pages_header(member, device):
    from jobs.queue.services import job_set_shared

    job = make_job(member, device, state="running")

    async def scenario():
        comm, snapshot = await _socket(member, f"job:{job.pk}")
        await sync_to_async(job_set_shared)(job=job, by=member, shared=True)
        after = await _drain(comm)
        await comm.disconnect()
        return snapshot, after

    snapshot, after = run_async(scenario)
    badge = f'id="job-{job.pk}-privacy"'
    assert any(badge in t and ">private<" in t for t in snapshot)
    assert any(badge in t and "shared with the household" in t for t in after), after


# -- a page gets only what it shows -------------------------------------------------------------------------------
WATCH = re.compile(r'ws-connect="/ws/hub/\?watch=([^"]*)"')


def test_every_fragment_a_page_receives_has_a_target_on_that_page(admin_user, member, device, media):
    """Each page's own ws-connect URL, then every kind of push: each fragment names an element of the page."""
    from devices.live import device_push
    from jobs.core.changes import job_ticked
    from jobs.core.transitions import job_set, job_transition
    from jobs.queue.services import job_set_shared

    running = make_job(member, device, state="running")
    queued = make_job(member, device, prompt="waiting its turn")
    done = make_job(member, device, state="done", prompt="all done")
    add_artifact(done, media)
    pages = []
    for user in (member, admin_user):
        client = Client()
        client.force_login(user)
        for path in [
            "/",
            "/jobs/queue/",
            f"/jobs/new/?device={device.pk}&kind=video",
            f"/jobs/{running.pk}/",
            f"/jobs/{queued.pk}/",
            f"/jobs/{done.pk}/",
            "/devices/",
            f"/devices/{device.pk}/",
        ]:
            html = client.get(path).content.decode()
            found = WATCH.search(html)
            assert found, f"{path} opens no socket"
            pages.append((user, path, found.group(1), html))

    def changes():
        job_set(running.pk, progress=55.0, phase="Rendering step 4 of 4")
        job_ticked(running.pk)
        job_transition(queued.pk, from_states=["queued"], to="cancelled", message="Cancelled.")
        job_set_shared(job=done, by=member, shared=True)
        device_push(device.pk)

    async def scenario():
        sockets = [(user, path, html, *(await _socket(user, watch))) for user, path, watch, html in pages]
        await sync_to_async(changes)()
        out = []
        for user, path, html, comm, snapshot in sockets:
            out.append((user, path, html, snapshot, await _drain(comm)))
            await comm.disconnect()
        return out

    missing, pushed = [], 0
    for user, path, html, snapshot, received in run_async(scenario):
        for text in snapshot + received:
            element = live.element_id(text)
            if f'id="{element}"' not in html:
                missing.append(f"{user} on {path}: #{element}")
        pushed += len(received)
    assert not missing, missing
    assert pushed >= 20  # the changes really reached the pages


# -- the plan goes out capped, as the pages draw it --------------------------------------------------------------
def _plan_items(html: str) -> list[str]:
    return re.findall(r'class="(?:plan|qa)-item" id="(?:plan|qa-job)-(\d+)"', html)


def test_the_pushed_plan_is_the_dashboards_glance_and_the_controls_the_queue_pages_first_page(
    member, device, monkeypatch
):
    from jobs.live import fragments
    from jobs.live.broadcast import broadcast_queue

    monkeypatch.setattr(fragments, "QUEUE_PAGE_SIZE", 3)
    jobs = [make_job(member, device, prompt=f"heron {i}") for i in range(fragments.PLAN_SHOWN + 4)]
    live.mark_watched(f"queue:{device.pk}")
    tap = Tap(monkeypatch, live.queue_group(device.pk), live.control_group(device.pk))
    broadcast_queue(device.pk)
    sent = [m["html"] for m in tap.messages() if m["type"] == "hub.fragment"]
    plans = [h for h in sent if live.element_id(h) == f"device-{device.pk}-queue"]
    controls = [h for h in sent if live.element_id(h) == f"device-{device.pk}-queue-admin"]
    assert len(plans) == 3 and len(controls) == 1  # everyone's, the admins', Mia's; the controls once
    for html in plans:
        assert _plan_items(html) == [str(j.pk) for j in jobs[: fragments.PLAN_SHOWN]]
        assert "and 4 more waiting — " in html and "plan-pager" not in html
    assert _plan_items(controls[0]) == [str(j.pk) for j in jobs[:3]]
    assert f"1–3 of {len(jobs)} waiting · page 1 of 4" in controls[0]


def test_a_plan_socket_gets_what_the_dashboard_shows_at_load_and_by_push(member, device):
    from jobs.live import fragments
    from jobs.queue.services import job_cancel

    jobs = [make_job(member, device, prompt=f"kite {i}") for i in range(fragments.PLAN_SHOWN + 2)]
    client = Client()
    client.force_login(member)
    page = client.get("/").content.decode()
    on_page = re.search(rf'id="device-{device.pk}-queue".*?</section>', page, re.S).group(0)

    async def scenario():
        comm, snapshot = await _socket(member, f"plan:{device.pk}")
        await sync_to_async(job_cancel)(job=jobs[0], by=member, reason="not this one")
        after = await _drain(comm)
        await comm.disconnect()
        return snapshot, after

    snapshot, after = run_async(scenario)
    queue = f'id="device-{device.pk}-queue"'
    at_load = [t for t in snapshot if queue in t[:200]]
    assert len(at_load) == 1 and _plan_items(at_load[0]) == _plan_items(on_page)
    assert "and 2 more waiting" in at_load[0] and "and 2 more waiting" in on_page
    pushed = [t for t in after if queue in t[:200]]
    assert pushed and _plan_items(pushed[-1]) == [str(j.pk) for j in jobs[1 : fragments.PLAN_SHOWN + 1]]
    assert "and 1 more waiting" in pushed[-1]  # the next one moved up into the glance
