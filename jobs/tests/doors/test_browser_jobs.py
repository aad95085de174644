"""The UI end to end: Chromium against the live hub (ASGI web + Celery worker + Redis) and the Tiiny emulator.

The emulator runs slower here than in the engine tests (``set_speed``) so a render lasts long enough for the
progress bar to be seen moving. Every test signs in through the real login page.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from conftest import save_screenshot
from jobs.models import Job
from jobs.queue.services import job_submit
from jobs.tests.conftest import wait_job
from jobs.tests.ui_fixtures import MESH, PNG, VIDEO

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# A function, not an expression: Playwright evals a bare expression in the page, which the CSP refuses.
LIVE = "() => document.body.dataset.live === 'open'"


@pytest.fixture(autouse=True)
def _usable_broker_pool():
    """Fresh broker pools in this (test) process. hub/tests/test_live_wire.py's broker-down test closes the
    connection pool, but celery keeps its producer pool bound to it: later ``.delay()`` calls here would fail
    with "Acquire on closed pool" when both modules run in one session."""
    from hub.testing import fresh_broker_pools

    fresh_broker_pools()
    yield


NO_SIDE_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


def off_loop(fn, /, *args, **kwargs):
    """Run a service in a plain thread: Playwright's sync API keeps an event loop in the test thread, where the
    after-commit live pushes (async_to_sync) would be refused, so nobody's page would hear of the change."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def submit_video(owner, device, shared=False, **params):
    p = {"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4, **params}
    return off_loop(
        job_submit, owner=owner, device=device, kind="video", model_id=VIDEO, params=p, shared=shared
    )


def test_a_member_queues_a_video_watches_it_and_plays_it(signed_in_page, member, pocket, tiiny, live_worker):
    tiiny.set_speed(40)  # ~10 s render: long enough to watch the bar move
    page = signed_in_page(member)
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=video")
    page.fill("#id_prompt", "a red fox running through fresh snow")
    page.check("input[name=size][value='832x480']")
    page.fill("#id_seconds", "2")
    page.select_option("#id_steps", "4")
    page.wait_for_selector("#admission:has-text('ready ≈')", timeout=15000)
    save_screenshot(page, "new-job")
    # The summary re-renders as fields change (debounced): let it settle so the button doesn't move under the click.
    page.wait_for_timeout(1000)
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    # As after a Tab: in headless Chromium a mouse press right after select_option can land off-target.
    page.focus("#job-submit")
    with page.expect_navigation(timeout=30000):
        page.click("#job-submit")
    assert "/jobs/new/" not in page.url, page.inner_text("main")[:1500]
    job = Job.objects.get(owner=member)
    page.wait_for_function(LIVE, timeout=15000)
    page.evaluate("window.__marker = 'same-page'")
    seen: set[int] = set()
    titles: set[str] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        value = page.evaluate(f"Number(document.getElementById('job-{job.pk}-progress').value)")
        seen.add(int(value))
        titles.add(page.title())
        if page.query_selector(f"#job-{job.pk}-status[data-state=done]"):
            break
        if page.query_selector(f"#job-{job.pk}-status[data-state=failed]"):
            pytest.fail(page.inner_text(f"#job-{job.pk}-status"))
        time.sleep(0.2)
    assert page.query_selector(f"#job-{job.pk}-status[data-state=done]"), (
        f"not done; progress seen {sorted(seen)}"
    )
    assert any(0 < v < 100 for v in seen), f"the bar never showed a value between 0 and 100: {sorted(seen)}"
    assert page.evaluate("window.__marker") == "same-page"  # it all arrived over the socket, no reload
    page.wait_for_function(
        "() => { const v = document.querySelector('video.player'); return v && v.readyState >= 2; }",
        timeout=20000,
    )
    assert page.evaluate("document.title").startswith(job.prompt[:10]) or "·" in page.evaluate(
        "document.title"
    )
    save_screenshot(page, "job-video")


def test_a_glb_result_loads_in_model_viewer(signed_in_page, member, pocket, live_worker):
    job = job_submit(
        owner=member,
        device=pocket,
        kind="mesh",
        model_id=MESH,
        params={"stages": ["shape", "export"], "format": "glb"},
        upload_files={"image": SimpleUploadedFile("obj.png", PNG, "image/png")},
    )
    wait_job(job, timeout=90)
    page = signed_in_page(member)
    page.goto(f"/jobs/{job.pk}/")
    # A 1 MB module: on a loaded 2-core box (CI, two processes) defining it once took over 20 s.
    page.wait_for_function("() => customElements.get('model-viewer') !== undefined", timeout=60000)
    page.wait_for_function("() => document.querySelector('model-viewer').loaded === true", timeout=60000)
    save_screenshot(page, "job-3d")


def test_another_person_sees_the_queue_move_but_not_the_private_job(
    signed_in_page, member, other_member, pocket, tiiny, live_worker
):
    tiiny.set_speed(60)
    other = signed_in_page(other_member)
    other.wait_for_function(LIVE, timeout=15000)
    first = submit_video(member, pocket, prompt="mia's secret surprise")
    second = submit_video(member, pocket, prompt="mia's second secret")
    running = f"#device-{pocket.pk}-running"
    other.wait_for_selector(f"{running}:has-text('Video by mia')", timeout=60000)
    other.wait_for_selector(f"#device-{pocket.pk}-queue .plan-item", timeout=60000)
    save_screenshot(other, "dashboard-other-person")
    wait_job(second, timeout=150)
    other.wait_for_selector(f"{running}:has-text('Nothing rendering right now')", timeout=30000)
    other.wait_for_selector(f"#device-{pocket.pk}-queue:has-text('The queue is empty')", timeout=30000)
    assert "secret" not in other.content()
    response = other.goto(f"/jobs/{first.pk}/")
    assert response.status == 404 and "Nothing here" in other.content() and "secret" not in other.content()


def test_the_owner_cancels_from_the_job_page(signed_in_page, member, pocket, live_worker):
    later = timezone.now() + dt.timedelta(hours=3)
    job = job_submit(
        owner=member,
        device=pocket,
        kind="video",
        model_id=VIDEO,
        when="not_before",
        not_before=later,
        params={"prompt": "not yet", "size": "832x480", "seconds": 2, "steps": 4},
    )
    page = signed_in_page(member)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_function(LIVE, timeout=15000)
    page.on("dialog", lambda dialog: dialog.accept())
    page.click(f"#job-{job.pk}-actions summary")
    page.fill(f"#reason-{job.pk}", "changed my mind")
    page.click(f"#cancel-{job.pk}")
    page.wait_for_selector(f"#job-{job.pk}-status[data-state=cancelled]", timeout=15000)
    job.refresh_from_db()
    assert job.state == "cancelled" and job.cancel_reason == "changed my mind"
    assert "changed my mind" in page.inner_text(f"#job-{job.pk}-events")


def test_a_push_keeps_what_the_owner_opened_and_typed_in_the_actions_box(signed_in_page, member, pocket):
    from jobs.queue.services import job_set_shared

    job = job_submit(
        owner=member,
        device=pocket,
        kind="video",
        model_id=VIDEO,
        when="not_before",
        not_before=timezone.now() + dt.timedelta(hours=3),
        params={"prompt": "half typed", "size": "832x480", "seconds": 2, "steps": 4},
    )
    page = signed_in_page(member)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_function(LIVE, timeout=15000)
    page.click(f"#job-{job.pk}-actions summary")
    page.fill(f"#reason-{job.pk}", "changed my")
    page.focus(f"#reason-{job.pk}")
    page.evaluate(f"() => {{ document.getElementById('job-{job.pk}-buttons').dataset.old = '1'; }}")
    # Shared from another tab: the buttons box changes ("Make private") and arrives by push.
    off_loop(job_set_shared, job=job, by=member, shared=True)
    page.wait_for_selector("#job-share:has-text('Make private')", timeout=15000)
    assert (
        page.evaluate(f"() => document.getElementById('job-{job.pk}-buttons').dataset.old") is None
    )  # replaced
    assert page.is_visible(f"#cancel-{job.pk}")  # the box it opened is still open
    assert page.input_value(f"#reason-{job.pk}") == "changed my"
    assert page.evaluate("() => document.activeElement.id") == f"reason-{job.pk}"
    page.keyboard.type(" mind")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click(f"#cancel-{job.pk}")
    page.wait_for_selector(f"#job-{job.pk}-status[data-state=cancelled]", timeout=15000)
    job.refresh_from_db()
    assert job.cancel_reason == "changed my mind"


@pytest.mark.parametrize(
    "path,name",
    [
        ("/", "dashboard"),
        ("/jobs/new/", "new-job"),
        ("/jobs/", "gallery"),
        ("/jobs/queue/", "queue"),
        ("/accounts/people/", "people"),
        ("/jobs/new/?kind=mesh", "new-3d"),
        ("/jobs/new/?kind=speech", "new-speech"),
        ("/jobs/{job}/", "job"),
    ],
)
def test_pages_fit_a_phone(signed_in_page, admin_user, member, pocket, path, name):
    job = submit_video(member, pocket, prompt="a_long_unbroken_prompt_" * 8)
    page = signed_in_page(admin_user, width=390, height=844)
    page.goto(path.format(job=job.pk))
    page.wait_for_load_state("networkidle")
    assert page.evaluate(NO_SIDE_SCROLL), f"{path} scrolls sideways at 390 px"
    save_screenshot(page, f"{name}-phone")


@pytest.mark.parametrize(
    "path,name",
    [
        ("/", "dashboard"),
        ("/jobs/", "gallery"),
        ("/jobs/queue/", "queue-admin"),
        ("/accounts/people/", "people"),
    ],
)
def test_screenshots_of_the_main_pages(signed_in_page, admin_user, member, pocket, path, name):
    submit_video(member, pocket, prompt="a lighthouse at dusk", shared=True)
    submit_video(member, pocket, prompt="a private fox")
    page = signed_in_page(admin_user)
    page.goto(path)
    page.wait_for_load_state("networkidle")
    save_screenshot(page, name)


# Records notifications instead of showing them (headless has no notification centre); permission is granted.
FAKE_NOTIFICATIONS = """
window.__notes = [];
window.Notification = function (title, options) { window.__notes.push({title: title, body: (options || {}).body}); };
window.Notification.permission = "granted";
window.Notification.requestPermission = function () { return Promise.resolve("granted"); };
"""


def test_it_notifies_the_owner_when_a_job_finishes(signed_in_page, member, admin_user, pocket, live_worker):
    from jobs.queue.services import queue_pause, queue_resume

    off_loop(queue_pause, device=pocket, by=admin_user)  # hold the job until the page is watching
    job = submit_video(member, pocket, prompt="ping me when done")
    page = signed_in_page(member)
    page.add_init_script(FAKE_NOTIFICATIONS)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_function(LIVE, timeout=15000)
    page.click("#notify-toggle")
    page.wait_for_selector("#notify-toggle[aria-pressed=true]")
    off_loop(queue_resume, device=pocket, by=admin_user)
    page.wait_for_selector(f"#job-{job.pk}-status[data-state=done]", timeout=90000)
    page.wait_for_function("() => window.__notes.length > 0", timeout=5000)
    note = page.evaluate("window.__notes[0]")
    assert note == {"title": "Your job finished", "body": "ping me when done"}
    assert page.evaluate("window.__notes.length") == 1  # once, though several fragments carry the state


def test_a_read_only_link_shows_only_the_result(
    browser, live_server_asgi, signed_in_page, member, pocket, live_worker
):
    from jobs.queue.services import job_share_link

    job = wait_job(submit_video(member, pocket, prompt="a fox for grandma"), timeout=90)
    job_share_link(job=job, by=member, enable=True)
    job.refresh_from_db()
    context = browser.new_context(base_url=live_server_asgi.extra["url"])  # nobody signed in
    try:
        page = context.new_page()
        page.goto(f"/jobs/shared/{job.share_token}/")
        page.wait_for_function("() => document.querySelector('video.player').readyState >= 2", timeout=20000)
        assert "Cancel" not in page.content() and "Sign out" not in page.content()
        save_screenshot(page, "share-link")
        job_share_link(job=job, by=member, enable=False)
        assert page.goto(f"/jobs/shared/{job.share_token}/").status == 404
    finally:
        context.close()


def test_dark_mode(signed_in_page, member, pocket):
    submit_video(member, pocket, prompt="a fox at night", shared=True)
    page = signed_in_page(member)
    page.emulate_media(color_scheme="dark")
    page.goto("/")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 24, 28)"
    save_screenshot(page, "dashboard-dark")
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=video")
    save_screenshot(page, "new-job-dark")


def test_the_dashboard_gauges_fill_in_live(signed_in_page, member, pocket, live_worker, live_beat):
    page = signed_in_page(member)
    page.wait_for_function(LIVE, timeout=15000)
    page.evaluate("window.__marker = 'same-page'")
    # The beat's poller reads the emulator and pushes the gauges; nothing here reloads the page.
    page.wait_for_selector(f"#device-{pocket.pk}-gauges .gauge-value:has-text('%')", timeout=45000)
    assert page.evaluate("window.__marker") == "same-page"
    save_screenshot(page, "dashboard-live-gauges")


def test_an_admin_controls_the_queue_live(signed_in_page, admin_user, member, pocket, live_worker):
    page = signed_in_page(admin_user)
    page.goto("/jobs/queue/")
    page.wait_for_function(LIVE, timeout=15000)
    page.click(f"#queue-{pocket.pk}-pause")
    page.wait_for_selector(f"#queue-{pocket.pk}-resume", timeout=10000)
    first = submit_video(member, pocket, prompt="first in line")
    second = submit_video(member, pocket, prompt="second in line")
    # The plan push makes the control list reload itself: both jobs appear without a reload.
    page.wait_for_selector(f"#qa-job-{second.pk}", timeout=20000)
    page.click(f"#run-next-{second.pk}")
    page.wait_for_function(
        f"() => {{ const items = [...document.querySelectorAll('#device-{pocket.pk}-queue-admin .qa-item')];"
        f" return items.length === 2 && items[0].id === 'qa-job-{second.pk}'; }}",
        timeout=15000,
    )
    save_screenshot(page, "queue-control")
    page.click(f"#queue-{pocket.pk}-resume")
    wait_job(second, timeout=90)
    wait_job(first, timeout=90)
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.started_at < first.started_at  # "run next" really ran it first
