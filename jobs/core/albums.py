"""Who sees what through albums (``jobs.models.Album``): the one place the job access check asks about them.

- An album is seen by its owner and its members (``AlbumMember``, viewer or contributor); anyone else, admins
  included, gets "No such album." (a 404, exactly like a missing one). Albums are personal collections: an admin
  sees every job anyway, through the gallery, but not other people's albums.
- An album lets its people see a job it holds, private or not, when the job's owner put it there
  (``AlbumItem.added_by`` is the job's owner): :func:`album_grant` / :func:`sees_through_album`, which
  ``jobs.core.selectors.can_view`` asks, so the job page, its files, thumbnails, previews, the REST job and the
  live job topic all follow it. A household-shared job someone else added is seen as any shared job is: while it
  stays shared.
- Removing a member, an item or the album takes that access away with the row; ``jobs.queue.albums`` tells the
  person's open sockets to re-check what they watch, after commit.

The album's jobs for a person (:func:`album_jobs`) are what its page, the REST album and its download list.

- An album's read-only link (``Album.share_token``; its expiry, password and opens are ``jobs.core.share_links``'s,
  as a job's link) shows :func:`album_link_jobs`: what the album's owner sees in it as a member would, never
  more (an admin owner's "sees everything" does not pass to the link): the owner's own results, the
  household-shared ones, and those their owners put there. Its files open only for those jobs; a job leaving
  the album (or the trash, or becoming private when someone else added it) leaves the link at once.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.http import Http404

from jobs.models import Album, AlbumItem, AlbumMember, Job, JobKind

OWNER = "owner"


def _signed_in(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False))


def _in_album(user: Any, prefix: str = "album__") -> Q:
    """The albums ``user`` owns or is a member of, as a condition on a relation to Album (``prefix``)."""
    return Q(**{f"{prefix}owner": user}) | Q(**{f"{prefix}members__user": user})


def albums_for(user: Any) -> QuerySet[Album]:
    """The albums ``user`` sees: their own and those they are a member of (most recently changed first), each
    with ``member_role`` (their role as a member, None for their own): a list needs no query per album."""
    if not _signed_in(user):
        return Album.objects.none()
    member_of = AlbumMember.objects.filter(album=OuterRef("pk"), user=user)
    return (
        Album.objects.select_related("owner")
        .annotate(is_member=Exists(member_of), member_role=Subquery(member_of.values("role")[:1]))
        .filter(Q(owner=user) | Q(is_member=True))
    )


def role_of(user: Any, album: Album) -> str | None:
    """``user``'s part in an album from :func:`albums_for` (read from its annotation, no query)."""
    return OWNER if album.owner_id == user.pk else album.member_role


def album_for(user: Any, album_id: Any) -> Album:
    """The album, with ``role`` set to "owner", "contributor" or "viewer" for ``user``; Http404 when it doesn't
    exist or ``user`` is neither its owner nor a member (no existence leak)."""
    album = albums_for(user).filter(pk=album_id).first() if isinstance(album_id, int) else None
    if album is None:
        raise Http404("No such album.")
    album.role = role_of(user, album)
    return album


def role_in(user: Any, album: Album) -> str | None:
    """``user``'s part in ``album``: "owner", "contributor", "viewer", or None."""
    if not _signed_in(user):
        return None
    if album.owner_id == user.pk:
        return OWNER
    return AlbumMember.objects.filter(album=album, user=user).values_list("role", flat=True).first()


def may_add(role: str | None) -> bool:
    return role in (OWNER, AlbumMember.Role.CONTRIBUTOR)


def album_grant(user: Any) -> Q:
    """A condition on Job: ``user`` sees the job through an album (its owner put it in an album of ``user``'s)."""
    granted = AlbumItem.objects.filter(job=OuterRef("pk"), added_by=OuterRef("owner")).filter(_in_album(user))
    return Q(Exists(granted))


def sees_through_album(user: Any, job: Job) -> bool:
    """Whether ``user`` sees ``job`` through an album (``jobs.core.selectors.can_view`` asks it last)."""
    if not _signed_in(user):
        return False
    return AlbumItem.objects.filter(job=job, added_by_id=job.owner_id).filter(_in_album(user)).exists()


def album_viewer_ids(job: Any) -> set[int]:
    """The people who see ``job`` through an album: the live job topic's audience beyond owner and admins."""
    items = AlbumItem.objects.filter(job_id=job.pk, added_by_id=job.owner_id)
    owners = set(items.values_list("album__owner_id", flat=True))
    members = AlbumMember.objects.filter(album__in=items.values("album_id")).values_list("user_id", flat=True)
    return owners | set(members)


def album_jobs(
    user: Any, album: Album, *, kind: str | None = None, oldest_first: bool = False, as_member: bool = False
) -> QuerySet[Job]:
    """The jobs of ``album`` that ``user`` (one of its people: :func:`album_for`) may see, each with
    ``added_at`` (when it joined the album), newest addition first (``oldest_first``: the other way).

    Its jobs whose owner put them there, those shared with the household, and ``user``'s own; a job deleted
    through /v1 (``hidden_at``) is left out as everywhere. ``kind`` narrows to one kind of result; ``as_member``:
    the rule for members even when ``user`` is an admin (the album's link: :func:`album_link_jobs`)."""
    # One join to the album's items (filter, then annotate from it): a second filter() on ``album_items`` would
    # join again and match the job's items in other albums.
    qs = (
        Job.objects.select_related("owner", "device")
        .filter(album_items__album=album, hidden_at__isnull=True)
        .annotate(added_at=F("album_items__added_at"), added_by_id=F("album_items__added_by_id"))
    )
    if as_member or not getattr(user, "is_admin", False):
        qs = qs.filter(Q(owner=user) | Q(shared=True) | Q(added_by_id=F("owner_id")))
    if kind in JobKind.values:
        qs = qs.filter(kind=kind)
    order = ("added_at", "id") if oldest_first else ("-added_at", "-id")
    return qs.order_by(*order)


def in_albums(job_ids: set[int]) -> set[int]:
    """Those of ``job_ids`` that are in some album (retention keeps them: ``jobs.queue.retention``)."""
    return set(AlbumItem.objects.filter(job_id__in=job_ids).values_list("job_id", flat=True))


def last_visit(user: Any, album: Album) -> Any:
    """When ``user`` last opened ``album`` (None: never), read before this visit is recorded."""
    if album.owner_id == getattr(user, "pk", None):
        return album.owner_visit_at
    return AlbumMember.objects.filter(album=album, user=user).values_list("last_visit_at", flat=True).first()


def album_by_share_token(token: str) -> Album:
    """The album whose read-only link is ``token``; Http404 for none (never made, or revoked)."""
    album = Album.objects.select_related("owner").filter(share_token=token).first() if token else None
    if album is None:
        raise Http404("No such album.")
    return album


def album_link_jobs(album: Album, *, oldest_first: bool = False) -> QuerySet[Job]:
    """What the album's read-only link shows: the jobs its owner sees in it as a member would (module doc)."""
    return album_jobs(album.owner, album, oldest_first=oldest_first, as_member=True)
