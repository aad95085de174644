"""The websocket matrix: every topic the consumer accepts × the five people, against ``TOPICS`` in
``access_declarations``; then pushes of every kind, and no private marker reaches a socket of the wrong person.

Every socket goes through ``hub.asgi.application`` (origin validator, session and auth middleware, router)
with a session cookie and an Origin header, over the run's real Redis channel layer. The sockets are opened
and drained concurrently, so the whole matrix takes a few seconds.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from hub import live
from hub.testing import run_async
from hub.tests.access_declarations import TOPICS
from hub.tests.matrix_support import ROLES, build_world

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ORIGIN = b"http://localhost"
QUIET_S = 0.5
#: ids that must never make a socket fail: unicode digits, huge numbers, unknown kinds, garbage
HOSTILE_WATCH = "job:²,job:99999999999999999999,queue:abc,nope:1,job:,:7,device:-1,mine:0x1,job:1;drop"


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def world(admin_user, member, other_member, viewer, media):
    people = {"viewer": viewer, "owner": member, "other": other_member, "admin": admin_user}
    return build_world(people=people, media_root=media)


class Socket:
    def __init__(self, role: str, client: Client | None, watch: str) -> None:
        from hub.asgi import application

        headers = [(b"origin", ORIGIN), (b"host", b"localhost")]
        if client is not None:
            cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
            headers.append((b"cookie", cookie.encode()))
        self.role, self.watch = role, watch
        self.comm = WebsocketCommunicator(application, f"/ws/hub/?watch={watch}", headers=headers)
        self.accepted = False
        self.closed = False
        self.snapshot: list[str] = []
        self.pushed: list[str] = []

    async def open(self) -> Socket:
        self.accepted, _ = await self.comm.connect(timeout=30)  # dozens open at once, on a busy machine
        if self.accepted:
            self.snapshot = await self.drain()
        return self

    async def drain(self) -> list[str]:
        new: list[str] = []
        while self.accepted and not self.closed and not await self.comm.receive_nothing(timeout=QUIET_S):
            message = await self.comm.receive_output()
            if message["type"] == "websocket.close":
                self.closed = True
            elif message.get("text"):
                new.append(message["text"])
        return new

    async def close(self) -> None:
        if self.accepted:
            await self.comm.disconnect()


def topics_for(world) -> dict[str, str]:
    """Topic label -> the watch value, one per declared (kind, variant)."""
    device = world.device.pk
    return {
        "job/private": f"job:{world.private_job.pk}",
        "job/shared": f"job:{world.shared_job.pk}",
        "queue": f"queue:{device}",
        "device": f"device:{device}",
        "mine": f"mine:{world.people['owner'].pk}",  # the owner's rows
        "plan": f"plan:{device}",
        "card": f"card:{device}",
        "wire": f"wire:{world.people['owner'].pk}",
        "album": f"album:{world.album.pk}",
    }


def test_every_topic_kind_has_a_declaration():
    kinds = set(live._topics)
    declared = {label.split("/")[0] for label in TOPICS}
    assert kinds - declared == set(), (
        f"websocket topic kinds without a line in access_declarations.TOPICS: {sorted(kinds - declared)}"
    )
    assert declared - kinds == set(), f"declared topics nobody registers: {sorted(declared - kinds)}"


def test_the_websocket_matrix(world):
    from devices.live import device_push
    from jobs.live.broadcast import broadcast_job, broadcast_queue
    from jobs.models import Job
    from jobs.tests.ui_fixtures import hold_device

    hold_device(world.device)  # the session's beat (if running) neither recovers, dispatches nor polls here
    clients: dict[str, Client | None] = {"anon": None}
    for role in ROLES[1:]:
        clients[role] = Client()
        clients[role].force_login(world.people[role])
    # The private job is running, so its pushes carry progress too.
    Job.objects.filter(pk=world.private_job.pk).update(state="running", progress=12.0)
    topics = topics_for(world)

    async def scenario():
        sockets = [Socket(role, clients[role], watch) for role in ROLES for watch in topics.values()]
        sockets += [Socket(role, clients[role], HOSTILE_WATCH) for role in ROLES]
        await asyncio.gather(*(s.open() for s in sockets))
        for job in (world.private_job, world.shared_job, world.queued_job):
            await sync_to_async(broadcast_job)(job.pk)
        await sync_to_async(broadcast_queue)(world.device.pk)
        await sync_to_async(device_push)(world.device.pk)
        pushed = await asyncio.gather(*(s.drain() for s in sockets))
        for s, frames in zip(sockets, pushed, strict=True):
            s.pushed = frames
        await asyncio.gather(*(s.close() for s in sockets))
        return sockets

    started = time.monotonic()
    sockets = run_async(scenario)
    elapsed = time.monotonic() - started
    by_watch = {watch: label for label, watch in topics.items()}
    failures = []
    for s in sockets:
        label = by_watch.get(s.watch, "hostile ids")
        where = f"{s.role} watching {s.watch} ({label})"
        if label == "hostile ids":
            got = "refused" if not s.accepted else "yes" if s.snapshot else "no"
            wanted = "refused" if s.role == "anon" else "no"  # accepted, but nothing to watch
        else:
            got = "refused" if not s.accepted else "yes" if s.snapshot else "no"
            wanted = TOPICS[label].split()[ROLES.index(s.role)]
        if got != wanted:
            failures.append(f"{where}: got {got}, declared {wanted}")
        for what, text in world.forbidden_for(s.role).items():
            for phase, frames in (("snapshot", s.snapshot), ("push", s.pushed)):
                if any(text in frame for frame in frames):
                    failures.append(f"{where}: the {what} reached {s.role} in a {phase}")
    # The pushes happened: the owner's and the admin's page of the private job got its fresh fragments.
    for role in ("owner", "admin"):
        page = next(s for s in sockets if s.role == role and s.watch == topics["job/private"])
        if not any(world.markers["private prompt"] in f for f in page.pushed):
            failures.append(f"{role}'s page of the private job got no push with its prompt")
    print(
        f"websocket matrix: {len(TOPICS)} topics (kinds {sorted(live._topics)}), {len(ROLES)} roles, "
        f"{len(sockets)} sockets, {sum(len(s.snapshot) + len(s.pushed) for s in sockets)} frames "
        f"in {elapsed:.1f} s"
    )
    assert not failures, "\n".join(failures)
