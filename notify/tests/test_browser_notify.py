"""Notifications in Chromium with the permission really granted (context.grant_permissions), observed through a
spy that wraps — not replaces — window.Notification; the service worker's push -> showNotification through
Chromium's own push delivery (DevTools ServiceWorker.deliverPushMessage; headless Chromium has no push service
to subscribe to on a machine without the internet); and a job that finishes on the emulator with the real
worker: the in-tab notification, the sound, the favicon progress, and its delivery shown on the job page."""

from __future__ import annotations

import json

import pytest

from conftest import save_screenshot
from jobs.tests.conftest import make_device
from jobs.tests.doors.test_browser_jobs import LIVE, _usable_broker_pool, off_loop, submit_video  # noqa: F401
from notify.models import Delivery, PrivateHost
from notify.services import channel_create

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Wraps the real constructor: the page still needs the real permission (nothing here grants or fakes it).
SPY = """
window.__notes = [];
(function () {
  var Real = window.Notification;
  if (!Real) return;
  function Spy(title, options) {
    window.__notes.push({ title: title, body: (options || {}).body || "", permission: Real.permission });
    return new Real(title, options);
  }
  Spy.prototype = Real.prototype;
  Spy.requestPermission = function () { return Real.requestPermission.apply(Real, arguments); };
  Object.defineProperty(Spy, "permission", { get: function () { return Real.permission; } });
  window.Notification = Spy;
})();
"""


@pytest.fixture
def pocket(tiiny):
    return make_device(tiiny)


def _granted(page, live_server_asgi):
    page.context.grant_permissions(["notifications"], origin=live_server_asgi.extra["url"])
    page.add_init_script(SPY)
    return page


def test_the_page_shows_the_permission_and_a_test_notification(signed_in_page, member, live_server_asgi):
    page = signed_in_page(member)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    _granted(page, live_server_asgi)
    page.goto("/notify/")
    page.wait_for_selector("#notify-permission[data-permission=granted]")
    assert page.text_content("#notify-permission") == "allowed"
    # Web Push needs a push service this machine can't reach: its button shows, the stop button doesn't
    assert page.is_visible("#notify-enable") and not page.is_visible("#notify-disable")
    page.wait_for_function("() => document.body.dataset.pushSubscribed === '0'")
    assert page.is_visible("#notify-push-on") and not page.is_visible("#notify-push-off")
    page.click("#notify-enable")  # granted, but not yet on for this browser
    page.wait_for_selector("#notify-permission[data-on='1']")
    assert not page.is_visible("#notify-enable") and page.is_visible("#notify-disable")
    assert page.evaluate("() => localStorage.getItem('hub-notify')") == "on"
    page.check("#notify-sound")
    page.click("#notify-try")
    page.wait_for_function("() => window.__notes.length === 1")
    assert page.evaluate("() => window.__notes[0]") == {
        "title": "Tiiny Hub",
        "body": "Notifications work in this tab.",
        "permission": "granted",
    }
    page.wait_for_function("() => Number(document.body.dataset.notifyBeeped || 0) >= 1")  # the sound played
    assert not errors, errors
    save_screenshot(page, "notify-page")


def test_the_page_fits_a_phone_and_its_add_form_follows_the_kind(signed_in_page, member, live_server_asgi):
    page = signed_in_page(member, width=390, height=844)
    page.goto("/notify/")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    page.select_option("#id_kind", "email")
    assert (
        page.is_visible("#id_address")
        and not page.is_visible("#id_url")
        and not page.is_visible("#id_secret")
    )
    page.select_option("#id_kind", "webhook")
    assert page.is_visible("#id_url") and page.is_visible("#id_secret") and not page.is_visible("#id_address")
    page.fill("#id_url", "ftp://nope")
    page.click("#channel-add")
    assert "http:// or https://" in page.text_content(".field-error")  # a 400 with the form, the kind kept
    assert page.input_value("#id_kind") == "webhook"
    save_screenshot(page, "notify-page-phone")


def test_a_push_reaches_the_service_worker_which_shows_it(signed_in_page, member, live_server_asgi):
    page = _granted(signed_in_page(member), live_server_asgi)
    page.goto("/notify/")
    cdp = page.context.new_cdp_session(page)
    registrations = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda e: registrations.extend(e["registrations"]))
    cdp.send("ServiceWorker.enable")
    scope = page.evaluate(
        "async () => { await navigator.serviceWorker.register('/sw.js', {scope: '/'});"
        " return (await navigator.serviceWorker.ready).scope; }"
    )
    assert scope == live_server_asgi.extra["url"] + "/"
    for _ in range(300):  # DevTools tells of the registration by an event that may trail the page's promise
        if any(r["scopeURL"] == scope for r in registrations):
            break
        page.wait_for_timeout(100)
    registration = next(r for r in registrations if r["scopeURL"] == scope)
    payload = {
        "title": "Finished: a kite",
        "body": "Video on Pocket, done.",
        "url": "/jobs/7/",
        "tag": "hub-job.done-7",
    }
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {"origin": live_server_asgi.extra["url"], "registrationId": registration["registrationId"], "data": json.dumps(payload)},
    )  # fmt: skip
    # Polled here on the very read that is asserted: with an async wait_for_function before it, two full runs
    # passed the wait and then read no notification (the push not shown yet, or the wait not awaiting it).
    read = (
        "async () => (await (await navigator.serviceWorker.ready).getNotifications())"
        ".map(n => ({title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url}))"
    )
    shown = page.evaluate(read)
    for _ in range(150):
        if shown:
            break
        page.wait_for_timeout(100)
        shown = page.evaluate(read)
    assert shown == [
        {
            "title": "Finished: a kite",
            "body": "Video on Pocket, done.",
            "tag": "hub-job.done-7",
            "url": "/jobs/7/",
        }
    ]


def test_my_job_finishing_notifies_beeps_and_lists_its_delivery(
    signed_in_page, member, admin_user, pocket, tiiny, live_worker, live_server_asgi, receiver
):
    from jobs.queue.services import queue_pause, queue_resume

    hook = receiver([200])
    off_loop(
        PrivateHost.objects.create, host="127.0.0.1"
    )  # the worker's own process reads what admins allowed
    off_loop(channel_create, owner=member, kind="webhook", name="My hook", url=f"{hook.url}/in")
    tiiny.set_speed(40)  # a render of some seconds: the favicon shows its progress
    off_loop(queue_pause, device=pocket, by=admin_user)  # hold the job until the page watches
    job = submit_video(member, pocket, prompt="tell me when the fox is done")
    page = _granted(signed_in_page(member), live_server_asgi)
    page.add_init_script(
        "localStorage.setItem('hub-notify', 'on'); localStorage.setItem('hub-notify-sound', 'on');"
    )
    page.add_init_script(  # every favicon notify.js draws (the body's data-notify-icon: the percentage, "" = none)
        "window.__icons = []; document.addEventListener('DOMContentLoaded', function () {"
        " new MutationObserver(function () { window.__icons.push(document.body.dataset.notifyIcon); })"
        ".observe(document.body, {attributes: true, attributeFilter: ['data-notify-icon']}); });"
    )  # fmt: skip
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_function(LIVE, timeout=15000)
    assert page.locator(f"#job-{job.pk}-deliveries #job-deliveries-empty").count() == 1
    off_loop(queue_resume, device=pocket, by=admin_user)

    page.wait_for_selector(f"#job-{job.pk}-status[data-state=done]", timeout=120000)
    page.wait_for_function("() => window.__notes.length > 0", timeout=10000)
    assert page.evaluate("() => window.__notes") == [
        {"title": "Your job finished", "body": "tell me when the fox is done", "permission": "granted"}
    ]
    page.wait_for_function("() => Number(document.body.dataset.notifyBeeped || 0) === 1")
    # the favicon showed a progress while it ran, and is back to the hub's own once it is done
    icons = page.evaluate("() => window.__icons")
    assert any(i not in ("", None) for i in icons), icons
    assert page.evaluate("() => document.body.dataset.notifyIcon") == ""
    assert page.get_attribute("link[rel~=icon][type='image/svg+xml']", "href").endswith("favicon.svg")
    # the job's own box lists the worker's delivery once it was sent (it asks again when the state changes)
    page.wait_for_selector("#job-deliveries .delivery-row[data-status=sent]", timeout=30000)
    assert "My hook" in page.text_content(f"#job-{job.pk}-deliveries")
    assert json.loads(hook.wait(1)[0].body)["job"]["id"] == job.pk
    assert Delivery.objects.get(job_id=job.pk).status == "sent"
