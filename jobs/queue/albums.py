"""Albums: the one place for every rule about changing them (the pages and REST both call these).

Who sees an album and its jobs is ``jobs.core.albums``'s (the job access check asks it); here:

- anyone signed in makes albums of their own (``album_create``); only the owner renames, deletes, invites and
  removes people (``album_rename``, ``album_delete``, ``album_invite``, ``album_remove_member``); a member may
  leave (remove themselves);
- the owner and contributors add results (``album_add_jobs``): finished jobs with a result, their own or ones
  shared with the household; all or nothing, each refusal naming its job; a job already there is refused;
- the owner removes any item, a contributor those they added, anyone the jobs that are their own
  (``album_remove_item``);
- a member who goes (removed, or leaving) takes their additions with them: their own private results never stay
  visible to people they no longer share with;
- only the owner makes, revokes and sets the options of the album's read-only link (``album_share_link``,
  ``album_share_link_options``: the rules of its expiry and password are ``jobs.core.share_links``'s, as a job's);
  a new link starts clean (no expiry, no password, 0 opens) and revoking clears them;
- every change that takes access away tells the people concerned's open sockets, after commit, to re-check what
  they watch (``hub.live.reauthorize``): a job page they saw only through the album stops at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from hub import live
from hub.accounts import audit
from jobs.core import share_links
from jobs.core.albums import OWNER, may_add, role_in
from jobs.core.selectors import can_view
from jobs.models import Album, AlbumItem, AlbumMember, Artifact, Job, JobState, new_share_token
from jobs.queue.admission import RequestInvalid

NAME_MAX = 80
#: One request adds at most this many results (a page's selection, not the whole history).
ADD_MAX = 200
ROLES = tuple(AlbumMember.Role.values)


def _name(name: Any) -> str:
    text = " ".join(str(name or "").split())
    if not text:
        raise RequestInvalid({"name": ["Give the album a name."]})
    if len(text) > NAME_MAX:
        raise RequestInvalid({"name": [f"At most {NAME_MAX} characters."]})
    return text


def _require_owner(user: Any, album: Album) -> None:
    if album.owner_id != getattr(user, "pk", None):
        raise PermissionDenied("Only the album's owner may do that.")


def _people(album: Album) -> list[int]:
    return [album.owner_id, *AlbumMember.objects.filter(album=album).values_list("user_id", flat=True)]


def _recheck_after_commit(user_ids: Iterable[int]) -> None:
    """Each person's open sockets re-check what they watch once this transaction is in (``hub.consumers``)."""
    groups = [live.user_group(pk) for pk in sorted(set(user_ids))]
    if groups:
        transaction.on_commit(lambda: [live.reauthorize(g) for g in groups])


def album_create(*, by: Any, name: Any) -> Album:
    if not getattr(by, "is_authenticated", False):
        raise PermissionDenied
    return Album.objects.create(owner=by, name=_name(name))


def album_rename(*, album: Album, by: Any, name: Any) -> Album:
    _require_owner(by, album)
    album.name = _name(name)
    album.save(update_fields=["name", "updated"])
    return album


@transaction.atomic
def album_delete(*, album: Album, by: Any) -> None:
    _require_owner(by, album)
    _recheck_after_commit(_people(album))
    album.delete()


# -- items --------------------------------------------------------------------------------------------------------
def _why_not(user: Any, job: Job | None, has_result: bool, present: bool) -> str:
    """Why ``user`` can't add ``job`` ("" when they may)."""
    if job is None or not can_view(user, job):
        return "No such job."
    if job.owner_id != user.pk and not job.shared:
        return "Only your own results, or ones shared with the household, can go in an album."
    if job.state != JobState.DONE or not has_result:
        return "Only a finished job with a result can go in an album."
    if present:
        return "It is in this album already."
    return ""


def _refusals(album: Album, by: Any, ids: list[int | None]) -> dict[str, list[str]]:
    """Why each of ``ids`` can't be added (``jobs[<i>]``: its message), read in three queries whatever their
    number; empty when every one may."""
    wanted = {pk for pk in ids if pk is not None}
    jobs = Job.objects.select_related("owner").in_bulk(wanted)
    results = set(
        Artifact.objects.filter(job_id__in=wanted)
        .exclude(kind=Artifact.Kind.THUMB)
        .values_list("job_id", flat=True)
    )
    present = set(AlbumItem.objects.filter(album=album, job_id__in=wanted).values_list("job_id", flat=True))
    errors: dict[str, list[str]] = {}
    seen: set[int | None] = set()
    for i, pk in enumerate(ids):
        if pk is None:
            errors[f"jobs[{i}]"] = ["A job's number."]
            continue
        why = _why_not(by, jobs.get(pk), pk in results, pk in present) or (
            "Given twice." if pk in seen else ""
        )
        if why:
            errors[f"jobs[{i}]"] = [f"#{pk}: {why}"]
        seen.add(pk)
    return errors


@transaction.atomic
def album_add_jobs(*, album: Album, by: Any, job_ids: list[Any]) -> list[AlbumItem]:
    """Add the jobs ``job_ids`` (ints) to ``album``: all of them, or none with a message per refused job
    (``jobs[<i>]``, in the order given)."""
    role = role_in(by, album)
    if not may_add(role):
        raise PermissionDenied("Only the album's owner and its contributors may add results.")
    if not job_ids:
        raise RequestInvalid({"jobs": ["Choose at least one result."]})
    if len(job_ids) > ADD_MAX:
        raise RequestInvalid({"jobs": [f"At most {ADD_MAX} results at a time."]})
    ids = [pk if isinstance(pk, int) and not isinstance(pk, bool) else None for pk in job_ids]
    if errors := _refusals(album, by, ids):
        raise RequestInvalid(errors)
    items = [AlbumItem.objects.create(album=album, job_id=pk, added_by=by) for pk in dict.fromkeys(ids)]
    album.save(update_fields=["updated"])
    return items


@transaction.atomic
def album_remove_item(*, album: Album, by: Any, job_id: Any) -> None:
    item = (
        AlbumItem.objects.select_related("job").filter(album=album, job_id=job_id).first()
        if isinstance(job_id, int)
        else None
    )
    if item is None:
        raise RequestInvalid({"job": ["That result is not in this album."]})
    role = role_in(by, album)
    if not (role == OWNER or item.added_by_id == by.pk or item.job.owner_id == by.pk):
        raise PermissionDenied("Only the album's owner may remove what others added.")
    item.delete()
    album.save(update_fields=["updated"])
    _recheck_after_commit(_people(album))


# -- people -------------------------------------------------------------------------------------------------------
def _person(username: Any) -> Any:
    text = str(username or "").strip()
    user = get_user_model().objects.filter(username__iexact=text, is_active=True).first() if text else None
    if user is None:
        raise RequestInvalid(
            {"user": [f"No one here is called “{text[:150]}”." if text else "Give a username."]}
        )
    return user


@transaction.atomic
def album_invite(*, album: Album, by: Any, username: Any, role: Any) -> AlbumMember:
    """Invite ``username`` as a viewer or contributor; inviting a member again changes their role."""
    _require_owner(by, album)
    if role not in ROLES:
        raise RequestInvalid({"role": [f"One of {', '.join(ROLES)}."]})
    user = _person(username)
    if user.pk == album.owner_id:
        raise RequestInvalid({"user": ["That is the album's owner."]})
    member, created = AlbumMember.objects.get_or_create(album=album, user=user, defaults={"role": role})
    if not created and member.role != role:
        member.role = role
        member.save(update_fields=["role"])
    return member


@transaction.atomic
def album_remove_member(*, album: Album, by: Any, username: Any) -> None:
    """The owner removes a member, or a member leaves. What they added goes with them; their open pages and
    sockets lose the album's jobs at once (after commit)."""
    user = _person(username)
    if user.pk != getattr(by, "pk", None):
        _require_owner(by, album)
    deleted, _ = AlbumMember.objects.filter(album=album, user=user).delete()
    if not deleted:
        raise RequestInvalid({"user": [f"{user.username} is not a member of this album."]})
    AlbumItem.objects.filter(album=album, added_by=user).delete()
    album.save(update_fields=["updated"])
    _recheck_after_commit(_people(album) + [user.pk])


def album_visit(*, album: Album, user: Any) -> None:
    """``user`` opened ``album`` now: what is added later is "new since your last visit"."""
    now = timezone.now()
    if album.owner_id == user.pk:
        Album.objects.filter(pk=album.pk).update(owner_visit_at=now)
    else:
        AlbumMember.objects.filter(album=album, user=user).update(last_visit_at=now)


def albums_to_add_to(user: Any) -> list[Album]:
    """The albums ``user`` may add results to (the "Add to album" choice): their own and those they contribute to."""
    if not getattr(user, "is_authenticated", False):
        return []
    contributes = Q(members__user=user, members__role=AlbumMember.Role.CONTRIBUTOR)
    return list(Album.objects.filter(Q(owner=user) | contributes).distinct().order_by("name", "pk"))


# -- the read-only link -------------------------------------------------------------------------------------------
_FRESH = {
    "share_expires_at": None,
    "share_password": "",
    "share_opens": 0,
}  # a new (or revoked) link starts clean


def album_share_link(*, album: Album, by: Any, enable: bool) -> Album:
    """Make the album's read-only link (a new token each time) or revoke it (it stops working at once)."""
    _require_owner(by, album)
    if enable and not album.share_token:
        Album.objects.filter(pk=album.pk).update(share_token=new_share_token(), **_FRESH)
        audit.record(audit.Action.SHARE_CREATED, actor=by, target=album, target_name=f"album {album.pk}",
                     data={"album": album.name})  # fmt: skip
    elif not enable and album.share_token:
        Album.objects.filter(pk=album.pk).update(share_token="", **_FRESH)
    album.refresh_from_db()
    return album


def album_share_link_options(
    *, album: Album, by: Any, expires: str = "keep", password: str = "", remove_password: bool = False
) -> Album:
    """The link's expiry and password (``jobs.core.share_links.option_changes``; ``ValidationError`` with a
    sentence for the page)."""
    _require_owner(by, album)
    fields, _ = share_links.option_changes(
        album, expires=expires, password=password, remove_password=remove_password
    )
    if fields:
        Album.objects.filter(pk=album.pk).update(**fields)
    album.refresh_from_db()
    return album


def album_share_url(*, request: Any, album: Album) -> str:
    """The link's full address (on ``HUB_PUBLIC_URL`` when set, as a job's), or "" while there is none."""
    if not album.share_token:
        return ""
    path = reverse("jobs-album-public", args=[album.share_token])
    return f"{settings.HUB_PUBLIC_URL}{path}" if settings.HUB_PUBLIC_URL else request.build_absolute_uri(path)
