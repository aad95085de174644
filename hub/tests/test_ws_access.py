"""Websocket access is re-checked whenever it changes, not only at connect.

Every socket here goes through ``hub.asgi.application`` — the origin validator, the session/auth middleware
and the router — over the run's real Redis channel layer, with a session cookie made by a real sign-in.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from hub.testing import run_async
from jobs.tests.ui_fixtures import hold_device, make_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ORIGIN = b"http://localhost"
QUIET_S = 0.6  # how long "nothing more arrives" is waited for


def signed_in(user) -> Client:
    """A browser session of ``user`` (its own session row, like one browser profile)."""
    client = Client()
    client.force_login(user)
    return client


class Socket:
    """One open page: what it received, and whether the server closed it."""

    def __init__(self, client: Client, watch: str = "") -> None:
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        from hub.asgi import application

        self.comm = WebsocketCommunicator(
            application,
            f"/ws/hub/?watch={watch}" if watch else "/ws/hub/",
            headers=[(b"cookie", cookie.encode()), (b"origin", ORIGIN), (b"host", b"localhost")],
        )
        self.texts: list[str] = []
        self.closed = False

    async def open(self) -> Socket:
        connected, _ = await self.comm.connect(timeout=5)
        assert connected, "the socket was refused"
        await self.drain()
        return self

    async def drain(self, quiet: float = QUIET_S) -> list[str]:
        """Everything that arrives until the wire is quiet for ``quiet`` seconds."""
        new: list[str] = []
        while not self.closed and not await self.comm.receive_nothing(timeout=quiet):
            message = await self.comm.receive_output()
            if message["type"] == "websocket.close":
                self.closed = True
            elif message.get("text"):
                new.append(message["text"])
        self.texts.extend(new)
        return new

    async def close(self) -> None:
        await self.comm.disconnect()  # also after the server closed it: the consumer's disconnect runs


def test_a_member_stops_receiving_a_job_once_its_owner_makes_it_private(member, other_member, device):
    from jobs.core.transitions import job_note

    job = make_job(member, device, state="running", prompt="a shared fox", shared=True)
    hold_device(device)  # no background reconcile "recovers" the running row mid-test
    owner, other = signed_in(member), signed_in(other_member)

    async def scenario():
        mine = await Socket(owner, f"job:{job.pk}").open()
        theirs = await Socket(other, f"job:{job.pk}").open()
        assert any("a shared fox" in t for t in theirs.texts)  # shared: they may watch it
        # The owner makes it private through the page's own button, then the job moves on.
        response = await sync_to_async(owner.post)(f"/jobs/{job.pk}/share/", {"shared": "0"})
        assert response.status_code < 400
        await sync_to_async(job_note)(job.pk, "Cancelled because of the secret plan.")
        after_mine, after_theirs = await mine.drain(), await theirs.drain()
        await mine.close()
        await theirs.close()
        return after_mine, after_theirs

    after_mine, after_theirs = run_async(scenario)
    assert any("secret plan" in t for t in after_mine)  # the pushes happened
    assert not any("a shared fox" in t or "secret plan" in t for t in after_theirs), after_theirs


def test_an_admin_demoted_to_member_leaves_the_admins_group_at_once(admin_user, member, device):
    from conftest import _person
    from jobs.live.broadcast import broadcast_queue

    make_job(member, device, prompt="my private birthday surprise")
    hold_device(device)  # no background dispatch of the queued job (its plan pushes would race the test's)
    other_admin = _person("bea", "admin")
    ada, bea = signed_in(admin_user), signed_in(other_admin)

    async def scenario():
        socket = await Socket(ada, f"queue:{device.pk}").open()
        assert any("queue-admin" in t for t in socket.texts)  # the controls, while she is an admin
        response = await sync_to_async(bea.post)(
            f"/accounts/people/{admin_user.pk}/role/", {"role": "member"}
        )
        assert response.status_code == 302
        await socket.drain()
        await sync_to_async(broadcast_queue)(device.pk)
        after = await socket.drain()
        await socket.close()
        return socket.closed, after

    closed, after = run_async(scenario)
    assert not closed  # still a member: the page keeps its public updates
    assert any(f'id="device-{device.pk}-queue"' in t for t in after)
    assert not any("queue-admin" in t or "birthday surprise" in t for t in after), after


def test_every_socket_of_a_deactivated_person_is_closed(admin_user, member, device):
    ada = signed_in(admin_user)
    laptop, phone = signed_in(member), signed_in(member)

    async def scenario():
        sockets = [
            await Socket(laptop, f"device:{device.pk}").open(),
            await Socket(laptop).open(),
            await Socket(phone, f"mine:{member.pk}").open(),
        ]
        response = await sync_to_async(ada.post)(f"/accounts/people/{member.pk}/active/", {"active": "0"})
        assert response.status_code == 302
        for s in sockets:
            await s.drain()
        closed = [s.closed for s in sockets]
        for s in sockets:
            await s.close()
        return closed

    assert run_async(scenario) == [True, True, True]


def test_signing_out_closes_that_sessions_sockets_only(member, device):
    from jobs.live.broadcast import broadcast_job

    job = make_job(member, device, state="running", prompt="my own fox")
    hold_device(device)
    laptop, phone = signed_in(member), signed_in(member)

    async def scenario():
        tab1 = await Socket(laptop, f"job:{job.pk}").open()
        tab2 = await Socket(laptop).open()
        other = await Socket(phone, f"job:{job.pk}").open()
        response = await sync_to_async(laptop.post)("/accounts/logout/")
        assert response.status_code in (200, 302)
        await tab1.drain()
        await tab2.drain()
        await sync_to_async(broadcast_job)(job.pk)
        still = await other.drain()
        for s in (tab1, tab2, other):
            await s.close()
        return tab1.closed, tab2.closed, other.closed, still

    tab1_closed, tab2_closed, other_closed, still = run_async(scenario)
    assert tab1_closed and tab2_closed
    assert not other_closed and any("my own fox" in t for t in still)


def test_a_viewers_device_card_push_carries_no_address_while_the_admin_sees_it(admin_user, viewer, device):
    from devices.live import device_push
    from devices.services import device_refresh

    address = device.base_url.removeprefix("http://")  # nothing listens there: the poll finds it unreachable
    ada, vic = signed_in(admin_user), signed_in(viewer)
    hold_device(device)  # this test is the device's poller: the background beat must not race its push

    def poll() -> None:  # poll_device's body, under the claim held above
        device_refresh(device_id=device.pk)
        device_push(device.pk)

    async def scenario():
        theirs = await Socket(vic, f"device:{device.pk}").open()
        admins = await Socket(ada, f"device:{device.pk}").open()
        await sync_to_async(poll)()
        pushed_theirs, pushed_admins = await theirs.drain(), await admins.drain()
        # A reconnect (the snapshot) is the same story.
        again = await Socket(vic, f"device:{device.pk}").open()
        snapshot = again.texts
        for s in (theirs, admins, again):
            await s.close()
        return pushed_theirs, pushed_admins, snapshot

    pushed_theirs, pushed_admins, snapshot = run_async(scenario)
    cards = [t for t in pushed_theirs + snapshot if f'id="device-{device.pk}-card"' in t]
    assert cards and all("cannot be reached" in t for t in cards)
    assert not any(address in t for t in pushed_theirs + snapshot), cards
    admin_cards = [t for t in pushed_admins if f'id="device-{device.pk}-card"' in t]
    assert admin_cards and admin_cards[-1].count(address) == 1  # the newest card the admin got has it
    assert address in signed_in(admin_user).get("/").content.decode()
    assert address not in signed_in(viewer).get("/").content.decode()


def test_a_role_changed_in_the_admin_site_reaches_open_sockets_at_once(admin_user, member, device):
    from conftest import _person
    from jobs.live.broadcast import broadcast_queue

    make_job(member, device, prompt="my private birthday surprise")
    hold_device(device)  # no background dispatch of the queued job (its plan pushes would race the test's)
    bea = _person("bea", "admin")
    ada, bea_client = signed_in(admin_user), signed_in(bea)
    joined = admin_user.date_joined

    async def scenario():
        socket = await Socket(ada, f"queue:{device.pk}").open()
        response = await sync_to_async(bea_client.post)(
            f"/admin/accounts/user/{admin_user.pk}/change/",
            {
                "username": admin_user.username,
                "role": "viewer",
                "is_active": "on",
                "date_joined_0": joined.strftime("%Y-%m-%d"),
                "date_joined_1": joined.strftime("%H:%M:%S"),
            },
        )
        assert response.status_code == 302, response.content.decode()[:2000]
        await socket.drain()
        await sync_to_async(broadcast_queue)(device.pk)
        after = await socket.drain()
        await socket.close()
        return after

    after = run_async(scenario)
    assert any(f'id="device-{device.pk}-queue"' in t for t in after)
    assert not any("queue-admin" in t or "birthday surprise" in t for t in after), after


def test_the_heartbeat_notices_a_change_that_sent_no_message(admin_user, member, device):
    """The safety net: a role changed behind the services' back (a bare UPDATE) is noticed on the page's next
    heartbeat, and a session deleted behind its back closes the socket."""
    from django.contrib.sessions.models import Session

    from hub.accounts.models import User
    from jobs.live.broadcast import broadcast_queue

    make_job(member, device, prompt="my private birthday surprise")
    hold_device(device)  # no background dispatch of the queued job (its plan pushes would race the test's)
    ada, laptop = signed_in(admin_user), signed_in(member)

    async def scenario():
        admin_socket = await Socket(ada, f"queue:{device.pk}").open()
        member_socket = await Socket(laptop).open()
        await sync_to_async(User.objects.filter(pk=admin_user.pk).update)(role="member")
        key = laptop.cookies[settings.SESSION_COOKIE_NAME].value
        await sync_to_async(Session.objects.filter(session_key=key).delete)()
        for s in (admin_socket, member_socket):
            await s.comm.send_to(text_data='{"watching": true}')
            await s.drain()
        await sync_to_async(broadcast_queue)(device.pk)
        after = await admin_socket.drain()
        closed = admin_socket.closed, member_socket.closed
        for s in (admin_socket, member_socket):
            await s.close()
        return after, closed

    after, closed = run_async(scenario)
    assert closed == (False, True)
    assert not any("queue-admin" in t or "birthday surprise" in t for t in after), after


# -- the plan: each person's own entries by their prompt, nobody else's ----------------------------------------
def test_each_members_plan_names_their_own_jobs_by_prompt_and_no_other_socket_gets_it(
    admin_user, member, other_member, viewer, device
):
    from jobs.core.changes import job_ticked, plan_changed
    from jobs.core.transitions import job_set, job_transition

    hold_device(device)
    first = make_job(member, device, prompt="the moonlit fox of mia")
    make_job(other_member, device, prompt="the secret waltz of otto")
    people = {"mia": member, "otto": other_member, "vic": viewer, "ada": admin_user}
    clients = {name: signed_in(user) for name, user in people.items()}

    def more_work() -> None:
        job_transition(first.pk, from_states=["queued"], to="running", message="Rendering.")
        job_set(first.pk, progress=55.0, phase="step 3 of 4")
        job_ticked(first.pk)  # the running card's tick, in its versions
        make_job(member, device, prompt="the second kite of mia")
        plan_changed(device.pk)

    async def scenario():
        sockets = {name: await Socket(c, f"plan:{device.pk}").open() for name, c in clients.items()}
        snapshots = {name: list(s.texts) for name, s in sockets.items()}
        await sync_to_async(more_work)()
        pushed = {name: await s.drain() for name, s in sockets.items()}
        for s in sockets.values():
            await s.close()
        return snapshots, pushed

    snapshots, pushed = run_async(scenario)
    running, queue = f'id="device-{device.pk}-running"', f'id="device-{device.pk}-queue"'
    for name in people:
        for texts in (snapshots[name], pushed[name]):
            assert any(queue in t for t in texts), name  # the plan reached every page, at load and by push
        assert any(running in t and "55%" in t for t in pushed[name]), name  # the tick too
        everything = " ".join(snapshots[name] + pushed[name])
        mias = ("the moonlit fox of mia", "the second kite of mia")
        assert all(p in everything for p in mias) == (name in ("mia", "ada")), name
        assert any(p in everything for p in mias) == (name in ("mia", "ada")), name
        assert ("the secret waltz of otto" in everything) == (name in ("otto", "ada")), name
    # Mia's newest pushes name her jobs by prompt; what Vic got last calls them "Video by mia".
    assert "the second kite of mia" in [t for t in pushed["mia"] if queue in t][-1]
    assert "the moonlit fox of mia" in [t for t in pushed["mia"] if running in t][-1]
    assert "Video by mia" in [t for t in pushed["vic"] if running in t][-1]
    last_vic_plan = [t for t in pushed["vic"] if queue in t][-1]
    assert "Video by mia" in last_vic_plan and "Video by otto" in last_vic_plan


def test_admin_only_words_reach_admins_sockets_only(admin_user, member, viewer, device):
    """NPU budget units (the gauges) and the vault's memory summaries (the plan): rendered for admins only, at
    load and in every push; the live-wire topic is refused to anyone else."""
    from devices.capabilities import Capabilities, VaultCap
    from devices.live import device_push
    from devices.models import Device
    from jobs.live.broadcast import broadcast_queue

    hold_device(device)
    caps = Capabilities.from_dict(device.capabilities)
    caps.vault = VaultCap(
        summary_start_hour=23, summary_end_hour=5, summary_model="Qwen/Qwen3.6-35B-A3B-turbo"
    )
    Device.objects.filter(pk=device.pk).update(
        capabilities=caps.to_dict(), npu_units_used=40, npu_units_total=100
    )
    people = {"ada": admin_user, "mia": member, "vic": viewer}
    clients = {name: signed_in(user) for name, user in people.items()}

    def change() -> None:
        Device.objects.filter(pk=device.pk).update(npu_units_used=55, npu_util=61.0)
        device_push(device.pk)
        broadcast_queue(device.pk)

    async def scenario():
        sockets = {
            name: await Socket(c, f"device:{device.pk},plan:{device.pk},wire:{people[name].pk}").open()
            for name, c in clients.items()
        }
        snapshots = {name: list(s.texts) for name, s in sockets.items()}
        await sync_to_async(change)()
        pushed = {name: await s.drain() for name, s in sockets.items()}
        for s in sockets.values():
            await s.close()
        return snapshots, pushed

    snapshots, pushed = run_async(scenario)
    gauges = f'id="device-{device.pk}-gauges"'
    for name in people:
        assert any(gauges in t for t in pushed[name]), name  # the push happened for everyone
        for texts in (snapshots[name], pushed[name]):
            text = " ".join(texts)
            admin = name == "ada"
            assert ("NPU budget" in text) == admin and ("Memory summaries" in text) == admin, (name, texts)
    assert "NPU budget 55 / 100 units" in [t for t in pushed["ada"] if gauges in t][-1]
    from hub.live import wire_topic

    assert wire_topic(admin_user, str(admin_user.pk))[0]  # and the wire: ada's only (test_live_wire has more)


# -- the plan goes out capped: a private prompt beyond the glance stays where it was ---------------------------
def test_a_queue_socket_gets_the_glance_and_admins_the_first_page_of_controls(
    admin_user, member, other_member, device, monkeypatch
):
    """Over the whole stack: everyone's queue socket gets the dashboard's glance (the next ``PLAN_SHOWN`` and the
    "more" line) and no private prompt, admins the controls for the queue page's first page; a prompt on a later
    page of the controls goes to nobody."""
    from jobs.live import fragments
    from jobs.live.broadcast import broadcast_queue

    monkeypatch.setattr(fragments, "QUEUE_PAGE_SIZE", fragments.PLAN_SHOWN + 1)
    hold_device(device)
    for i in range(fragments.PLAN_SHOWN + 1):
        make_job(other_member, device, prompt=f"otto's shared kite {i}", shared=True)
    make_job(member, device, prompt="mia's birthday surprise")  # the last: past the glance and page 1
    ada, otto = signed_in(admin_user), signed_in(other_member)

    async def scenario():
        sockets = {"ada": await Socket(ada, f"queue:{device.pk}").open()}
        sockets["otto"] = await Socket(otto, f"queue:{device.pk}").open()
        at_load = {name: list(s.texts) for name, s in sockets.items()}
        await sync_to_async(broadcast_queue)(device.pk)
        pushed = {name: await s.drain() for name, s in sockets.items()}
        for s in sockets.values():
            await s.close()
        return at_load, pushed

    at_load, pushed = run_async(scenario)
    queue, controls = f'id="device-{device.pk}-queue"', f'id="device-{device.pk}-queue-admin"'
    for name in ("ada", "otto"):
        glance = [t for t in at_load[name] if queue in t[:200]]
        assert len(glance) == 1 and glance[0].count('class="plan-item"') == fragments.PLAN_SHOWN, name
        assert "and 2 more waiting" in glance[0], name
    admin_box = [t for t in at_load["ada"] if controls in t[:200]]
    assert len(admin_box) == 1 and admin_box[0].count('class="qa-item"') == fragments.PLAN_SHOWN + 1
    assert "Later →" in admin_box[0]  # mia's job is on page 2 of the controls
    assert not any(controls in t for t in at_load["otto"] + pushed["otto"])
    every = [t for texts in (*at_load.values(), *pushed.values()) for t in texts]
    assert not any("birthday surprise" in t for t in every)
