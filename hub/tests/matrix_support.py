"""Shared machinery of the project's own suites (access matrix, websocket matrix, fuzzing).

- :func:`url_patterns` walks the whole URL configuration (``get_resolver()``, recursively: the pages, the
  ninja ``/api/`` and ``/v1/`` patterns, the admin) and says, per pattern, its key (the URL name, or its
  route when it has none), its route, which door it sits behind and which methods its view declares.
- :func:`build_world` makes the cast's real objects: a private job of the owning member with a result file
  (bytes with a unique marker) and a read-only link, a shared job, a queued private job, a job whose link is
  handed out, a device with a key and an address, and an API token per person. ``World.markers`` lists what
  must never reach whom.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

ROLES = ("anon", "viewer", "owner", "other", "admin")


@dataclass(frozen=True)
class Pattern:
    key: str  # the URL name ("jobs-detail", "api:job_get"), or "route:<route>" for an unnamed pattern
    route: str  # e.g. "jobs/<int:job_id>/files/<int:artifact_id>/"
    door: str  # "page", "api" (ninja: Bearer or session) or "v1" (Bearer; a session may only read)
    methods: tuple[str, ...]  # GET and POST always, plus what the view itself declares
    kwargs: tuple[str, ...]  # names of the URL's parameters
    callback: Any = field(compare=False, repr=False)


def _declared_methods(callback: Any) -> set[str]:
    """Methods a view says it answers: ninja's operations, /v1's door, ``require_http_methods``."""
    from ninja.operation import PathView

    found: set[str] = set()
    seen: set[int] = set()
    todo = [callback]
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, PathView):
                found.update(m for op in value.operations for m in op.methods)
            elif callable(value):
                todo.append(value)
            elif (
                isinstance(value, (list, tuple, set, frozenset))
                and value
                and all(isinstance(m, str) and m.isupper() for m in value)
            ):
                found.update(value)  # require_http_methods(["GET", "POST"]) keeps its list in a closure
            elif isinstance(value, dict) and value and all(isinstance(m, str) and m.isupper() for m in value):
                found.update(value)  # jobs.doors.v1.door(GET="read", POST="submit")
        todo.append(getattr(fn, "__wrapped__", None))
    return {m for m in found if m in {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}}


def _route_of(pattern: Any) -> str:
    if isinstance(pattern, RoutePattern):
        return str(pattern._route)
    if isinstance(pattern, RegexPattern):
        return str(pattern._regex)
    return str(pattern)


def url_patterns() -> list[Pattern]:
    out: list[Pattern] = []

    def walk(resolver: URLResolver, prefix: str, namespace: str | None) -> None:
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                ns = ":".join(x for x in (namespace, entry.namespace) if x) or None
                walk(entry, prefix + _route_of(entry.pattern), ns)
            elif isinstance(entry, URLPattern):
                route = prefix + _route_of(entry.pattern)
                name = f"{namespace}:{entry.name}" if namespace and entry.name else entry.name
                key = name or f"route:{route}"
                door = "api" if route.startswith("api/") else "v1" if route.startswith("v1/") else "page"
                declared = _declared_methods(entry.callback)
                methods = tuple(m for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
                                if m in {"GET", "POST"} | declared)  # fmt: skip
                names = tuple(a or b for a, b in re.findall(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>", route))
                out.append(Pattern(key, route, door, methods, names, entry.callback))

    walk(get_resolver(), "", None)
    return out


def fill(route: str, values: dict[str, str]) -> str:
    """The path of ``route`` with each parameter replaced by ``values[name]`` (KeyError names a missing one)."""

    def converter(match: re.Match) -> str:
        return values[match.group(1)]

    # Regex patterns (the admin's app list, catch-alls): a named group becomes its value, anchors go.
    path = re.sub(r"\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)", converter, route)
    path = re.sub(r"<(?:\w+:)?(\w+)>", converter, path)
    path = path.replace("^", "").replace("$", "")
    return "/" + path


# ---------------------------------------------------------------------------------------------------------
# The cast's objects
# ---------------------------------------------------------------------------------------------------------


@dataclass(repr=False)
class World:
    people: dict[str, Any]  # role -> user (no "anon")
    device: Any
    private_job: Any  # the owner's, not shared, done, with a file and a read-only link
    private_artifact: Any
    shared_job: Any  # the owner's, shared with the household, done, with a file
    shared_artifact: Any
    queued_job: Any  # the owner's, private, waiting in the queue (its prompt must not show in the plan)
    linked_job: Any  # the owner's, private, done, whose read-only link is the one handed out
    linked_artifact: Any
    spare_token: Any  # an API token of the owner, for the revoke URL
    raw_tokens: dict[str, str]  # role -> the raw API token that role uses as Bearer
    markers: dict[str, str]  # what -> the unique text
    # which roles may see each marker (everything else must never contain it)
    allowed: dict[str, frozenset[str]]
    notify_channel: Any = None  # the owner's webhook channel (notify/): its URL and secret are never shown
    preset: Any = None  # the owner's own preset (jobs.queue.presets): nobody else sees it, not even an admin
    album: Any = None  # the owner's album holding the private job (jobs.queue.albums): nobody else is in it

    def __repr__(self) -> str:
        # Never the markers or the raw tokens: hypothesis and pytest print fixtures in their reports.
        return f"<World device {self.device.pk}, private job {self.private_job.pk}>"

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' printer, which otherwise lists fields
        printer.text(repr(self))

    def forbidden_for(self, role: str) -> dict[str, str]:
        return {what: text for what, text in self.markers.items() if role not in self.allowed[what]}


def build_world(*, people: dict[str, Any], media_root) -> World:
    """Every object a URL parameter can name, made through the project's own services."""
    from devices.models import Device
    from devices.services import device_register
    from hub.accounts.tokens import token_create
    from jobs.queue.services import job_share_link
    from jobs.tests.ui_fixtures import add_artifact, capabilities, make_job

    tag = uuid.uuid4().hex[:12]
    markers = {
        "private prompt": f"privmark-prompt-{tag}",
        "private file bytes": f"privmark-bytes-{tag}",
        "queued prompt": f"privmark-queued-{tag}",
        "device address": f"http://127.0.0.1:9/privmark-addr-{tag}",
        "device key": f"privmark-key-{tag}",
    }
    device = device_register(
        name="Pocket", kind="tiiny", base_url=markers["device address"], api_key=markers["device key"]
    )
    Device.objects.filter(pk=device.pk).update(
        state=Device.State.UNREACHABLE,
        state_message="The device cannot be reached.",
        state_fix="Check that it is switched on and on the same network.",
        capabilities=capabilities(),
        loaded_models=[],
    )
    device.refresh_from_db()
    owner = people["owner"]
    private = make_job(owner, device, state="done", prompt=markers["private prompt"])
    private_artifact = add_artifact(private, media_root, data=b"\x00\x00\x00\x18ftypmp42" + markers[
        "private file bytes"].encode())  # fmt: skip
    private = job_share_link(job=private, by=owner, enable=True)
    markers["private share token"] = private.share_token
    shared = make_job(owner, device, state="done", prompt="a fox everyone may watch", shared=True)
    shared_artifact = add_artifact(shared, media_root)
    queued = make_job(owner, device, state="queued", prompt=markers["queued prompt"])
    linked = make_job(owner, device, state="done", prompt="a fox behind a link")
    linked_artifact = add_artifact(linked, media_root)
    linked = job_share_link(job=linked, by=owner, enable=True)

    # Each in a batch of its own (``Job.batch``): the batch routes name the private job's or the shared job's.
    from jobs.models import Job

    for job, prefix in ((private, "p"), (shared, "s"), (queued, "q")):
        job.batch = f"{prefix}{tag}"
        Job.objects.filter(pk=job.pk).update(batch=job.batch)

    raw_tokens = {}
    for role, user in people.items():
        scopes = ["read"] if role == "viewer" else ["read", "submit"]
        raw_tokens[role] = token_create(user=user, name=f"{role} script", scopes=scopes)[1]
        markers[f"{role}'s API token"] = raw_tokens[role]
    spare, spare_raw = token_create(user=owner, name="spare", scopes=["read"])
    markers["owner's spare API token"] = spare_raw

    from notify.services import channel_create

    markers["webhook secret"] = f"privmark-whsec-{tag}"
    markers["webhook url"] = f"https://hooks.example.invalid/privmark-hook-{tag}"
    notify_channel = channel_create(
        owner=owner,
        kind="webhook",
        name="owner's hook",
        url=markers["webhook url"],
        secret=markers["webhook secret"],
    )
    from jobs.queue.presets import preset_create

    markers["private preset name"] = f"privmark-preset-{tag}"
    preset = preset_create(by=owner, kind="video", name=markers["private preset name"], values={"steps": 4})
    from jobs.queue.albums import album_add_jobs, album_create

    markers["private album name"] = f"privmark-album-{tag}"
    album = album_create(by=owner, name=markers["private album name"])
    album_add_jobs(album=album, by=owner, job_ids=[private.pk])
    trusted = frozenset({"owner", "admin"})
    allowed = {
        "private album name": frozenset({"owner"}),
        "private prompt": trusted,
        "private file bytes": trusted,
        "private share token": trusted,
        "queued prompt": trusted,
        "device address": frozenset({"admin"}),
        "private preset name": frozenset({"owner"}),
    }
    # Nobody sees a device key or a raw API token after it was created.
    allowed.update({what: frozenset() for what in markers if what not in allowed})
    return World(
        people=people,
        device=device,
        private_job=private,
        private_artifact=private_artifact,
        shared_job=shared,
        shared_artifact=shared_artifact,
        queued_job=queued,
        linked_job=linked,
        linked_artifact=linked_artifact,
        spare_token=spare,
        raw_tokens=raw_tokens,
        markers=markers,
        allowed=allowed,
        notify_channel=notify_channel,
        preset=preset,
        album=album,
    )


def kwarg_values(world: World, variant: str) -> dict[str, str]:
    """What each URL parameter is filled with. ``variant``: "private" (the private job), "shared" (the shared
    one), "link" (the read-only link and its own job's file), "foreign" (that link, the private job's file)."""
    from jobs.tests.ui_fixtures import VIDEO

    job = world.shared_job if variant == "shared" else world.private_job
    artifact = {"shared": world.shared_artifact, "link": world.linked_artifact}.get(
        variant, world.private_artifact
    )
    return {
        "job_id": str(job.pk),
        "batch": job.batch,
        "batch_id": job.batch,
        "video_id": f"video_{job.pk}",
        "artifact_id": str(artifact.pk),
        "device_id": str(world.device.pk),
        "token": world.linked_job.share_token,
        "user_id": str(world.people["other"].pk),
        "token_id": str(world.spare_token.pk),
        "channel_id": str(world.notify_channel.pk),
        "preset_id": str(world.preset.pk),
        "album_id": str(world.album.pk),
        "username": world.people["other"].username,  # not a member of the world's album
        "model_id": VIDEO,
        "rest": "no-such-route",
        "name": "image",  # an input's name (the world's jobs were made without inputs)
        "group_id": "999999",  # no such group: non-admins learn nothing (403 first); test_groups holds the real ones
        "host_id": "999999",  # no such private host: an admin's delete changes nothing and goes back to the page
        "invitation_id": "999999",  # no such invitation (hub/accounts/tests hold the real ones' 200s)
        "uidb64": "MQ",  # a password-reset link's person (with a token that is not a reset token)
        # the admin's own parameters
        "app_label": "jobs",
        "object_id": str(job.pk),
        "content_type_id": "1",
        "id": str(world.people["other"].pk),
        "url": "no-such-page/",
    }


def body_of(response) -> bytes:
    """The whole body, also of a streamed file (put back so the caller can still read it)."""
    if getattr(response, "streaming", False):
        content = b"".join(response.streaming_content)
        response.streaming_content = [content]
        return content
    return bytes(response.content)
