"""Pushed times over real sockets: one fragment for everyone, carrying the instant for the page to show in its
person's zone; and no live parts for someone who must first replace a one-time password.

Sockets go through ``hub.asgi.application`` (origin check, session auth, router) over the run's real Redis
channel layer, as in test_ws_access.py.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from hub.accounts.services import user_update_settings
from hub.testing import run_async
from hub.tests.test_ws_access import ORIGIN, Socket, signed_in
from jobs.tests.ui_fixtures import hold_device, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_a_pushed_time_carries_its_instant_and_is_the_same_html_for_every_zone(member, other_member, device):
    from jobs.core.transitions import job_note
    from jobs.models import JobEvent

    assert settings.TIME_ZONE == "UTC"
    user_update_settings(user=member, display_name="", email="", time_zone="Asia/Tokyo")
    user_update_settings(user=other_member, display_name="", email="", time_zone="America/Los_Angeles")
    job = make_job(member, device, state="running", prompt="a fox at dusk", shared=True)
    hold_device(device)

    async def scenario():
        tokyo = await Socket(signed_in(member), f"job:{job.pk}").open()
        la = await Socket(signed_in(other_member), f"job:{job.pk}").open()
        await sync_to_async(job_note)(job.pk, "The device is warming up.")
        pushed = await tokyo.drain(), await la.drain()
        await tokyo.close()
        await la.close()
        return pushed

    tokyo_pushed, la_pushed = run_async(scenario)
    event = JobEvent.objects.filter(job=job, message="The device is warming up.").get()
    at = event.at.astimezone(dt.UTC)

    def events(texts: list[str]) -> list[str]:
        return [t for t in texts if f'id="job-{job.pk}-events"' in t and "warming up" in t]

    assert events(tokyo_pushed) and events(tokyo_pushed) == events(la_pushed)  # rendered once, for everyone
    fragment = events(tokyo_pushed)[-1]
    # The instant in UTC to the second (the format shows seconds), the format, and the zone of its text:
    # the hub's, for a push (localtime.js turns it into the page's zone).
    element = f'<time datetime="{at:%Y-%m-%dT%H:%M:%SZ}" data-fmt="H:i:s" data-tz="UTC">{at:%H:%M:%S}</time>'
    assert element in fragment, fragment
    # A job page load in Tokyo shows the same event in Tokyo time, with the same instant.
    page = signed_in(member).get(f"/jobs/{job.pk}/").content.decode()
    tokyo_at = at.astimezone(dt.timezone(dt.timedelta(hours=9)))
    assert (
        f'<time datetime="{at:%Y-%m-%dT%H:%M:%SZ}" data-fmt="H:i:s" data-tz="Asia/Tokyo">{tokyo_at:%H:%M:%S}</time>'
        in page
    )
    assert re.search(r'<body[^>]* data-tz="Asia/Tokyo"', page)


def test_a_time_that_shows_minutes_names_its_minute_so_unchanged_pushes_stay_unchanged(member, device):
    """An estimate that moves by seconds each tick must not make the fragment differ while its text doesn't."""
    from django.template import Context, Template

    tpl = Template('{% load hub_time %}{{ at|when:"H:i" }}')
    a = dt.datetime(2026, 12, 1, 22, 30, 5, tzinfo=dt.UTC)
    b = a + dt.timedelta(seconds=40)
    assert tpl.render(Context({"at": a})) == tpl.render(Context({"at": b}))
    assert (
        tpl.render(Context({"at": a}))
        == '<time datetime="2026-12-01T22:30Z" data-fmt="H:i" data-tz="UTC">22:30</time>'
    )
    assert tpl.render(Context({"at": a + dt.timedelta(minutes=1)})) != tpl.render(Context({"at": a}))
    # a time of day (a night window, in the device's zone) has no instant: plain text
    assert Template('{% load hub_time %}{{ t|when:"H:i" }}').render(Context({"t": dt.time(22, 0)})) == "22:00"
    assert Template('{% load hub_time %}{{ t|when:"H:i" }}').render(Context({"t": None})) == ""


async def _connect(client) -> tuple[bool, WebsocketCommunicator]:
    from hub.asgi import application

    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    comm = WebsocketCommunicator(
        application,
        "/ws/hub/",
        headers=[(b"cookie", cookie.encode()), (b"origin", ORIGIN), (b"host", b"localhost")],
    )
    connected, _ = await comm.connect(timeout=5)
    return connected, comm


def test_someone_who_must_replace_a_one_time_password_gets_no_socket(admin_user, member, device):
    from hub.accounts.services import user_password_changed, user_set_one_time_password

    user_set_one_time_password(user=member, by=admin_user)
    member.refresh_from_db()
    client = signed_in(member)  # a session made with the one-time password
    assert member.must_change_password
    assert client.get("/").status_code == 302  # the pages lead to the password page

    async def refused():
        connected, comm = await _connect(client)
        await comm.disconnect()
        return connected

    assert run_async(refused) is False

    # Once they chose their own password the socket opens (a fresh sign-in: the change ends old sessions).
    member.set_password("plum-kettle-harbour-42")
    member.save()
    user_password_changed(user=member)
    client = signed_in(member)

    async def accepted():
        connected, comm = await _connect(client)
        await comm.disconnect()
        return connected

    assert run_async(accepted) is True


def test_an_open_socket_closes_once_its_person_must_replace_their_password(member, device):
    """The safety net: a flag set behind the socket's back (the admin site) closes it at the next heartbeat."""
    from hub.accounts.models import User

    client = signed_in(member)

    async def scenario():
        socket = await Socket(client).open()
        await sync_to_async(User.objects.filter(pk=member.pk).update)(must_change_password=True)
        await socket.comm.send_to(text_data='{"watching": true}')
        await socket.drain()
        closed = socket.closed
        await socket.close()
        return closed

    assert run_async(scenario) is True
