"""Album pages: the list (yours and shared with you), an album (its results as gallery cards, newest or oldest
first, one kind, a page at a time, "new since your last visit"), create, rename, delete after a confirmation,
its people (invite by username as viewer or contributor, remove, leave), and "Add to album" from a job page or a
gallery card.

The album's read-only link: its owner makes, revokes and sets its expiry and password on the album page; its
public page (``album_public``, signed out) shows what ``jobs.core.albums.album_link_jobs`` lets the link show, with
players and downloads through the token's own file URL (``album_public_file``: only jobs of that album).

Who sees what is ``jobs.core.albums``'s; every change is ``jobs.queue.albums``'s (REST calls the same). An album
you are not in is a 404, like one that doesn't exist.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST, require_safe

from hub.parsing import parse_id, parse_int
from jobs.core import albums as access
from jobs.core import share_links
from jobs.core.bookmarks import bookmarked_ids
from jobs.core.selectors import job_for
from jobs.doors.filters import GalleryCard
from jobs.doors.share_pages import link_refusal, password_given
from jobs.files.downloads import artifact_response
from jobs.live.broadcast import broadcast_album_news
from jobs.live.fragments import job_title, result_of
from jobs.models import Album, AlbumMember, Artifact, JobKind, JobState
from jobs.queue import albums as svc
from jobs.queue.admission import RequestInvalid

PAGE_SIZE = 24
SORTS = {"newest": "Newest first", "oldest": "Oldest first"}


def _album(request: HttpRequest, album_id: int) -> Album:
    return access.album_for(request.user, album_id)


def _refused(request: HttpRequest, exc: Exception) -> None:
    why = exc.summary() if isinstance(exc, RequestInvalid) else (str(exc) or "You may not do that.")
    messages.error(request, why)


@require_GET
def albums(request: HttpRequest) -> HttpResponse:
    mine, shared = [], []
    for album in access.albums_for(request.user).order_by("-updated", "-id"):
        (mine if album.owner_id == request.user.pk else shared).append(album)
    return render(request, "jobs/albums.html", {"mine": mine, "shared": shared, "name_max": svc.NAME_MAX})


@require_POST
def album_create(request: HttpRequest) -> HttpResponse:
    try:
        album = svc.album_create(by=request.user, name=request.POST.get("name"))
    except RequestInvalid as exc:
        _refused(request, exc)
        return redirect("jobs-albums")
    messages.success(request, f"Made the album “{album.name}”.")
    return redirect("jobs-album", album_id=album.pk)


def _cards(user: Any, jobs: list[Any], since: Any, role: str | None) -> list[dict[str, Any]]:
    """Each job as its gallery card, whether it is new since ``since`` (someone else added it after) and whether
    ``user`` may take it out (``jobs.queue.albums.album_remove_item`` checks again)."""
    marks = bookmarked_ids(user, [j.pk for j in jobs]) if jobs else set()
    out = []
    for job in jobs:
        thumb = job.thumbs[0] if job.state == JobState.DONE and job.thumbs else None
        card = GalleryCard.of(
            job,
            thumb_url=reverse("jobs-file", args=[job.pk, thumb.pk]) if thumb else "",
            bookmarked=job.pk in marks,
        )
        new = since is not None and job.added_at > since and job.added_by_id != user.pk
        out.append({"card": card, "new": new, "may_remove": _may_remove(user, job, role)})
    return out


def _may_remove(user: Any, job: Any, role: str | None) -> bool:
    return role == access.OWNER or user.pk in (job.added_by_id, job.owner_id)


@require_GET
def album_detail(request: HttpRequest, album_id: int) -> HttpResponse:
    album = _album(request, album_id)
    sort = request.GET.get("sort") if request.GET.get("sort") in SORTS else "newest"
    kind = request.GET.get("kind") if request.GET.get("kind") in JobKind.values else ""
    thumbs = Artifact.objects.filter(kind=Artifact.Kind.THUMB).order_by("id")
    qs = access.album_jobs(request.user, album, kind=kind or None, oldest_first=sort == "oldest")
    qs = qs.prefetch_related(Prefetch("artifacts", queryset=thumbs, to_attr="thumbs"))
    page = Paginator(qs, PAGE_SIZE).get_page(parse_int(request.GET.get("page"), 1, minimum=1))
    since = _since(request, album)
    jobs = list(page.object_list)
    ctx = {
        "album": album,
        "page": page,
        "cards": _cards(request.user, jobs, since, album.role),
        "since": since,
        "sort": sort,
        "sorts": SORTS,
        "kind": kind,
        "kinds": JobKind.choices,
        "may_add": access.may_add(album.role),
        "is_owner": album.role == access.OWNER,
        "members": AlbumMember.objects.filter(album=album).select_related("user").order_by("user__username"),
        "roles": AlbumMember.Role.choices,
        "name_max": svc.NAME_MAX,
    }
    if ctx["is_owner"]:  # the read-only link and its options (jobs.core.share_links), for its owner only
        ctx["share_url"] = svc.album_share_url(request=request, album=album)
        ctx["share_choices"] = [(value, label) for value, label, _ in share_links.EXPIRY_CHOICES]
        ctx["share_expired"] = share_links.is_expired(album)
    if request.htmx:
        return render(request, "jobs/album.html#album-results", ctx)
    return render(request, "jobs/album.html", ctx)


def _since(request: HttpRequest, album: Album) -> Any:
    """What is "new since your last visit": added after the visit before this one. Opening the album (no order,
    kind or page asked) records this visit and keeps the one before in the session, so paging and sorting within
    the visit keep the same marks."""
    key = f"album-since-{album.pk}"
    browsing = request.htmx or any(k in request.GET for k in ("sort", "kind", "page"))
    if browsing and key in request.session:
        return parse_datetime(request.session[key]) if request.session[key] else None
    since = access.last_visit(request.user, album)
    request.session[key] = since.isoformat() if since else ""
    svc.album_visit(album=album, user=request.user)
    return since


@require_POST
def album_rename(request: HttpRequest, album_id: int) -> HttpResponse:
    album = _album(request, album_id)
    try:
        svc.album_rename(album=album, by=request.user, name=request.POST.get("name"))
    except (RequestInvalid, PermissionDenied) as exc:
        _refused(request, exc)
    else:
        messages.success(request, f"Renamed to “{album.name}”.")
    return redirect("jobs-album", album_id=album.pk)


@require_http_methods(["GET", "POST"])
def album_delete(request: HttpRequest, album_id: int) -> HttpResponse:
    album = _album(request, album_id)
    if album.role != access.OWNER:
        raise PermissionDenied("Only the album's owner may delete it.")
    if request.method == "GET":
        return render(request, "jobs/album_delete.html", {"album": album})
    svc.album_delete(album=album, by=request.user)
    messages.success(request, f"Deleted the album “{album.name}”. Its results are where they were.")
    return redirect("jobs-albums")


@require_POST
def album_invite(request: HttpRequest, album_id: int) -> HttpResponse:
    album = _album(request, album_id)
    try:
        member = svc.album_invite(
            album=album, by=request.user, username=request.POST.get("user"), role=request.POST.get("role")
        )
    except (RequestInvalid, PermissionDenied) as exc:
        _refused(request, exc)
    else:
        messages.success(
            request, f"{member.user.username} is in the album as a {member.get_role_display().lower()}."
        )
    return redirect(reverse("jobs-album", args=[album.pk]) + "#album-people")


@require_POST
def album_member_remove(request: HttpRequest, album_id: int) -> HttpResponse:
    album = _album(request, album_id)
    username = request.POST.get("user", "")
    try:
        svc.album_remove_member(album=album, by=request.user, username=username)
    except (RequestInvalid, PermissionDenied) as exc:
        _refused(request, exc)
        return redirect("jobs-album", album_id=album.pk)
    if album.role != access.OWNER:  # they left
        messages.success(request, f"You left the album “{album.name}”.")
        return redirect("jobs-albums")
    messages.success(request, f"Removed {username} from the album.")
    return redirect(reverse("jobs-album", args=[album.pk]) + "#album-people")


@require_POST
def album_item_remove(request: HttpRequest, album_id: int) -> HttpResponse:
    album = _album(request, album_id)
    try:
        svc.album_remove_item(album=album, by=request.user, job_id=parse_id(request.POST.get("job")))
    except (RequestInvalid, PermissionDenied) as exc:
        _refused(request, exc)
    else:
        messages.success(request, "Removed it from the album (the result itself stays).")
    return redirect("jobs-album", album_id=album.pk)


def _back(request: HttpRequest, default: str) -> str:
    nxt = request.POST.get("next") or request.GET.get("next") or ""
    if nxt and url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        return nxt
    return default


@require_http_methods(["GET", "POST"])
def album_add(request: HttpRequest) -> HttpResponse:
    """ "Add to album" for one result (``?job=<id>``): choose one of your albums (or those you contribute to), or
    name a new one."""
    job = job_for(request.user, parse_id(request.POST.get("job") or request.GET.get("job")))
    back = _back(request, reverse("jobs-detail", args=[job.pk]))
    if request.method == "GET":
        ctx = {
            "job": job,
            "albums": svc.albums_to_add_to(request.user),
            "next": back,
            "name_max": svc.NAME_MAX,
        }
        return render(request, "jobs/album_add.html", ctx)
    try:
        with transaction.atomic():  # a new album is made only with the result in it
            if request.POST.get("new_name", "").strip():
                album = svc.album_create(by=request.user, name=request.POST["new_name"])
            else:
                album = access.album_for(request.user, parse_id(request.POST.get("album")))
                album.role = access.role_in(request.user, album)
            svc.album_add_jobs(album=album, by=request.user, job_ids=[job.pk])
            tell_album(album.pk, request.user.pk)
    except (RequestInvalid, PermissionDenied) as exc:
        _refused(request, exc)
        return redirect(f"{reverse('jobs-album-add')}?job={job.pk}")
    messages.success(request, f"Added to the album “{album.name}”.")
    return redirect(back)


def tell_album(album_id: int, by_id: int) -> None:
    """The album's open pages hear of the new results once they are in (the pages' and REST's adds alike)."""
    transaction.on_commit(lambda: broadcast_album_news(album_id, by_id))


def with_album_action(user: Any, cards: list[GalleryCard]) -> list[GalleryCard]:
    """Gallery cards with "Add to album" on the finished results ``user`` may put in an album (their own and the
    household's shared ones: ``jobs.queue.albums``'s rule, which checks it again on adding)."""
    url = reverse("jobs-album-add")
    return [
        replace(c, actions=(*c.actions, ("Add to album", f"{url}?job={c.pk}")))
        if c.state == JobState.DONE and (c.owner_id == user.pk or c.shared)
        else c
        for c in cards
    ]


# -- the album's read-only link: the token is the permission, for the jobs the link shows only ----------------------
@require_POST
def album_share_link(request: HttpRequest, album_id: int) -> HttpResponse:
    """Make or revoke the album's read-only link (its owner; a member gets 403, anyone else 404)."""
    album = _album(request, album_id)
    try:
        svc.album_share_link(album=album, by=request.user, enable=request.POST.get("enable") == "1")
    except PermissionDenied as exc:
        raise PermissionDenied("Only the album's owner may share it by a link.") from exc
    messages.success(request, "Made a read-only link." if album.share_token else "Revoked the link.")
    return redirect(reverse("jobs-album", args=[album.pk]) + "#album-link")


@require_POST
def album_share_link_options(request: HttpRequest, album_id: int) -> HttpResponse:
    album = _album(request, album_id)
    try:
        svc.album_share_link_options(
            album=album,
            by=request.user,
            expires=request.POST.get("expires", "keep"),
            password=request.POST.get("password", ""),
            remove_password=request.POST.get("remove_password") == "1",
        )
    except PermissionDenied as exc:
        raise PermissionDenied("Only the album's owner may change its link.") from exc
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, "Saved the link's expiry and password.")
    return redirect(reverse("jobs-album", args=[album.pk]) + "#album-link")


@login_not_required
@require_http_methods(["GET", "HEAD", "POST"])
def album_public(request: HttpRequest, token: str) -> HttpResponse:
    """The album as its link shows it (signed out): each result with its player and downloads, a page at a time."""
    album = access.album_by_share_token(token)
    if request.method == "POST":
        if not (share_links.has_password(album) and not share_links.is_expired(album)):
            return redirect("jobs-album-public", token=token)  # nothing to unlock: the page says what it is
        return password_given(request, album, what="album") or redirect("jobs-album-public", token=token)
    if (refusal := link_refusal(request, album, page=True, what="album")) is not None:
        return refusal
    if request.method == "GET" and "page" not in request.GET:
        share_links.count_open(album)
    every = Artifact.objects.order_by("id")
    qs = access.album_link_jobs(album).prefetch_related(
        Prefetch("artifacts", queryset=every, to_attr="every")
    )
    page = Paginator(qs, PAGE_SIZE).get_page(parse_int(request.GET.get("page"), 1, minimum=1))
    entries = []
    for job in page.object_list:
        for a in job.every:
            a.url = reverse("jobs-album-public-file", args=[token, job.pk, a.pk])
        files = [a for a in job.every if a.kind != Artifact.Kind.THUMB]
        poster = next(
            (a.url for a in job.every if a.kind == Artifact.Kind.THUMB), ""
        )  # the video's thumbnail
        entries.append(
            {
                "job": job,
                "title": job_title(job),
                "artifacts": files,
                "result": result_of(files),
                "poster": poster,
            }
        )
    has_mesh = any(e["job"].kind == JobKind.MESH for e in entries)
    ctx = {"album": album, "page": page, "entries": entries, "has_mesh": has_mesh, "public": True}
    return render(request, "jobs/album_public.html", ctx)


@login_not_required
@require_safe  # HEAD too: players probe a file before fetching ranges
def album_public_file(request: HttpRequest, token: str, job_id: int, artifact_id: int) -> HttpResponse:
    """A file (result or thumbnail) of a job the album's link shows; any other job's is a 404."""
    album = access.album_by_share_token(token)
    if (refusal := link_refusal(request, album, page=False)) is not None:
        return refusal
    job = get_object_or_404(access.album_link_jobs(album), pk=job_id)
    artifact = get_object_or_404(job.artifacts, pk=artifact_id)
    return artifact_response(request, artifact, access_checked=True, inline=not request.GET.get("download"))
