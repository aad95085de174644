"""REST routes for albums (``/api/albums``): list, create, get, rename, delete; add and remove results; invite and
remove people.

A door to what the Albums pages do, through the same rules (``jobs.core.albums`` for who sees what,
``jobs.queue.albums`` for changes): an album you are neither the owner nor a member of is "No such album.", a 404
exactly like a missing one (admins included); what only the owner may do is a 403 for members; bad input is a 422
naming the field (``jobs[2]`` for the third job of a request). GET needs the ``read`` scope, the rest ``submit``.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db import transaction
from django.http import HttpRequest
from ninja import Query, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status
from pydantic import Field, StrictBool

from hub.api_auth import require_scope
from hub.api_errors import ERRORS
from hub.parsing import parse_id
from jobs.core import albums as access
from jobs.doors.album_views import tell_album
from jobs.doors.api import json_body, json_request_body
from jobs.files.zips import NothingToDownload, TooManyJobs, stream_jobs_zip
from jobs.kinds.schemas import Strict
from jobs.models import Album, AlbumMember, Job
from jobs.queue import albums as svc
from jobs.queue.admission import RequestInvalid

router = Router(tags=["albums"])

READ, SUBMIT = "read", "submit"
PAGE_MAX = 500


class AlbumIn(Strict):
    name: str = Field(description="The album's name (at most 80 characters).", max_length=200)


class AlbumPatchIn(Strict):
    name: str | None = Field(None, description="A new name (at most 80 characters).", max_length=200)
    share: StrictBool | None = Field(
        None,
        description="`true` makes the album's read-only link (kept if it has one), `false` revokes it. The owner only.",
    )


class ItemsIn(Strict):
    jobs: list[int] = Field(description="Job ids: finished results of yours or shared with the household.")


class MemberIn(Strict):
    user: str = Field(description="A username of the household.", max_length=150)
    role: Literal["viewer", "contributor"] = Field(
        "viewer", description="`viewer` sees the album; `contributor` also adds their own results."
    )


class MemberOut(Schema):
    user: str
    role: str


class ItemOut(Schema):
    job: int
    kind: str
    state: str
    prompt: str
    owner: str
    shared: bool
    added_at: Any
    added_by: str
    url: str


class AlbumOut(Schema):
    id: int
    name: str
    owner: str
    role: str = Field(description="Yours: `owner`, `contributor` or `viewer`.")
    created: Any
    updated: Any


class AlbumDetailOut(AlbumOut):
    members: list[MemberOut]
    count: int = Field(description="How many of its results you may see.")
    items: list[ItemOut] = Field(description="Newest addition first, `limit` from `offset`.")
    share_url: str | None = Field(
        None,
        description="The owner's only: the album's read-only link (anyone with it sees the album's results), "
        "or null while it has none. Always null for members.",
    )


class AlbumListOut(Schema):
    items: list[AlbumOut]


def _album_out(album: Album, role: str) -> dict[str, Any]:
    return {
        "id": album.pk,
        "name": album.name,
        "owner": album.owner.username,
        "role": role,
        "created": album.created,
        "updated": album.updated,
    }


def _album(request: HttpRequest, album_id: str) -> Album:
    return access.album_for(request.user, parse_id(album_id))


def _item_out(job: Job, names: dict[int, str]) -> dict[str, Any]:
    return {
        "job": job.pk,
        "kind": job.kind,
        "state": job.state,
        "prompt": job.prompt,
        "owner": job.owner.username,
        "shared": job.shared,
        "added_at": job.added_at,
        "added_by": names.get(job.added_by_id, ""),
        "url": f"/api/jobs/{job.pk}",
    }


def _detail(request: HttpRequest, album: Album, *, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    qs = access.album_jobs(request.user, album)
    jobs = list(qs[offset : offset + limit])
    members = list(AlbumMember.objects.filter(album=album).select_related("user").order_by("user__username"))
    names = {m.user_id: m.user.username for m in members} | {album.owner_id: album.owner.username}
    return {
        **_album_out(album, album.role),
        "members": [{"user": m.user.username, "role": m.role} for m in members],
        "count": qs.count(),
        "items": [_item_out(j, names) for j in jobs],
        "share_url": (svc.album_share_url(request=request, album=album) or None)
        if album.role == access.OWNER
        else None,
    }


@router.get("", url_name="album_list", response={200: AlbumListOut, **ERRORS}, summary="List albums")
def album_list(request: HttpRequest):
    """Yours and those you are a member of, the most recently changed first."""
    require_scope(request, READ)
    return {
        "items": [_album_out(a, access.role_of(request.user, a)) for a in access.albums_for(request.user)]
    }


@router.post(
    "",
    url_name="album_create",
    response={201: AlbumDetailOut, **ERRORS},
    openapi_extra=json_request_body(AlbumIn),
    summary="Create an album",
)
def album_create(request: HttpRequest):
    require_scope(request, SUBMIT)
    album = svc.album_create(by=request.user, name=json_body(request, AlbumIn).name)
    return Status(201, _detail(request, access.album_for(request.user, album.pk)))


@router.get(
    "/{album_id}", url_name="album_get", response={200: AlbumDetailOut, **ERRORS}, summary="Get an album"
)
def album_get(
    request: HttpRequest,
    album_id: str,
    limit: int = Query(100, ge=1, le=PAGE_MAX),
    offset: int = Query(0, ge=0),
):
    """The album, its people and its results you may see, newest addition first."""
    require_scope(request, READ)
    return _detail(request, _album(request, album_id), limit=limit, offset=offset)


@router.get(
    "/{album_id}/download",
    url_name="album_download",
    response={**ERRORS},
    openapi_extra={"responses": {"200": {"description": "A zip", "content": {"application/zip": {}}}}},
    summary="Download an album as one zip",
)
def album_download(request: HttpRequest, album_id: str):
    """The album's results you may see as one zip, streamed as it is built: a folder per job
    (`0042-a-red-fox/video.mp4`) with its `settings.json`, as `GET /api/jobs/download`. 400 when none of them has a
    result or there are more than `HUB_ZIP_MAX_JOBS`."""
    require_scope(request, READ)
    album = _album(request, album_id)
    try:
        return stream_jobs_zip(request, access.album_jobs(request.user, album), label=f"album-{album.pk}")
    except (NothingToDownload, TooManyJobs) as exc:
        raise HttpError(400, str(exc)) from exc


@router.patch(
    "/{album_id}",
    url_name="album_update",
    response={200: AlbumDetailOut, **ERRORS},
    openapi_extra=json_request_body(AlbumPatchIn),
    summary="Rename an album, or share it by a link",
)
def album_update(request: HttpRequest, album_id: str):
    """The owner only. `{"name"}` renames it; `{"share": true}` makes its read-only link (returned as `share_url`;
    its expiry and password are set on the album's page), `{"share": false}` revokes it."""
    require_scope(request, SUBMIT)
    album = _album(request, album_id)
    body = json_body(request, AlbumPatchIn)
    if body.name is None and body.share is None:
        raise RequestInvalid({"name": ["Give a new name, or share: true or false."]})
    with transaction.atomic():
        if body.name is not None:
            svc.album_rename(album=album, by=request.user, name=body.name)
        if body.share is not None:
            svc.album_share_link(album=album, by=request.user, enable=body.share)
    return _detail(request, album)


@router.delete(
    "/{album_id}", url_name="album_delete", response={204: None, **ERRORS}, summary="Delete an album"
)
def album_delete(request: HttpRequest, album_id: str):
    """The owner only. The results themselves stay where they were."""
    require_scope(request, SUBMIT)
    svc.album_delete(album=_album(request, album_id), by=request.user)
    return Status(204, None)


@router.post(
    "/{album_id}/items",
    url_name="album_add",
    response={201: AlbumDetailOut, **ERRORS},
    openapi_extra=json_request_body(ItemsIn),
    summary="Add results to an album",
)
def album_add(request: HttpRequest, album_id: str):
    """The owner and contributors: finished results of theirs, or shared with the household. All or nothing: a
    refused job is a 422 naming it (`jobs[i]`): not found or not yours to see, not finished, already there."""
    require_scope(request, SUBMIT)
    album = _album(request, album_id)
    svc.album_add_jobs(album=album, by=request.user, job_ids=json_body(request, ItemsIn).jobs)
    tell_album(album.pk, request.user.pk)
    return Status(201, _detail(request, album))


@router.delete(
    "/{album_id}/items/{job_id}",
    url_name="album_remove",
    response={204: None, **ERRORS},
    summary="Remove a result from an album",
)
def album_remove(request: HttpRequest, album_id: str, job_id: str):
    """The owner any; a contributor what they added; anyone their own jobs. The result itself stays."""
    require_scope(request, SUBMIT)
    svc.album_remove_item(album=_album(request, album_id), by=request.user, job_id=parse_id(job_id))
    return Status(204, None)


@router.post(
    "/{album_id}/members",
    url_name="album_invite",
    response={201: MemberOut, **ERRORS},
    openapi_extra=json_request_body(MemberIn),
    summary="Invite someone to an album",
)
def album_invite(request: HttpRequest, album_id: str):
    """The owner only. Inviting a member again changes their role."""
    require_scope(request, SUBMIT)
    album = _album(request, album_id)  # a stranger's 404 before anything about the body
    body = json_body(request, MemberIn)
    member = svc.album_invite(album=album, by=request.user, username=body.user, role=body.role)
    return Status(201, {"user": member.user.username, "role": member.role})


@router.delete(
    "/{album_id}/members/{username}",
    url_name="album_uninvite",
    response={204: None, **ERRORS},
    summary="Remove someone from an album",
)
def album_uninvite(request: HttpRequest, album_id: str, username: str):
    """The owner removes anyone; a member may remove themselves (leave). What they added leaves with them, and
    they lose the album's results at once, open pages and live updates included."""
    require_scope(request, SUBMIT)
    svc.album_remove_member(album=_album(request, album_id), by=request.user, username=username)
    return Status(204, None)


__all__ = ["router"]
