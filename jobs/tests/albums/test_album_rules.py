"""The album rules (``jobs.queue.albums``) and who sees what through them (``jobs.core.albums``, asked by
``jobs.core.selectors.can_view``)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from jobs.core.albums import album_for, album_jobs, album_viewer_ids, albums_for
from jobs.core.selectors import can_view
from jobs.live.broadcast import job_audience
from jobs.models import AlbumItem
from jobs.queue import albums as svc
from jobs.queue.admission import RequestInvalid
from jobs.tests.albums.conftest import finished
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def test_it_shows_an_album_to_its_owner_and_members_only(
    album, member, other_member, viewer, stranger, admin_user
):
    for person in (member, other_member, viewer):
        assert album_for(person, album.pk).pk == album.pk
    assert album_for(member, album.pk).role == "owner"
    assert album_for(other_member, album.pk).role == "contributor"
    assert album_for(viewer, album.pk).role == "viewer"
    for person in (stranger, admin_user):  # admins see jobs, not other people's albums
        with pytest.raises(Http404):
            album_for(person, album.pk)
    assert list(albums_for(stranger)) == []
    assert [a.pk for a in albums_for(viewer)] == [album.pk]


def test_the_owners_private_result_is_seen_by_the_albums_people_only(
    album, member, other_member, viewer, stranger, device, media
):
    job = finished(member, device, media, prompt="our private beach")
    assert not can_view(viewer, job)
    svc.album_add_jobs(album=album, by=member, job_ids=[job.pk])
    assert can_view(viewer, job) and can_view(other_member, job)
    assert not can_view(stranger, job)
    assert [j.pk for j in album_jobs(viewer, album)] == [job.pk]
    assert album_viewer_ids(job) == {member.pk, other_member.pk, viewer.pk}
    assert {f"user.{viewer.pk}", f"user.{other_member.pk}"} <= set(job_audience(job))


def test_removing_a_member_takes_the_access_away_and_their_additions_with_them(
    album, member, other_member, viewer, device, media, django_capture_on_commit_callbacks
):
    theirs = finished(other_member, device, media, prompt="otto's private sunset")
    svc.album_add_jobs(album=album, by=other_member, job_ids=[theirs.pk])
    assert can_view(viewer, theirs) and can_view(member, theirs)
    with django_capture_on_commit_callbacks() as callbacks:
        svc.album_remove_member(album=album, by=member, username=other_member.username)
    assert callbacks  # their sockets (and the others') re-check what they watch
    assert not AlbumItem.objects.filter(job=theirs).exists()
    assert not can_view(viewer, theirs) and not can_view(member, theirs)
    with pytest.raises(Http404):
        album_for(other_member, album.pk)


def test_a_shared_job_someone_else_added_is_seen_only_while_it_stays_shared(
    album, member, other_member, viewer, device, media
):
    job = finished(other_member, device, media, prompt="otto's shared owl", shared=True)
    svc.album_add_jobs(album=album, by=member, job_ids=[job.pk])  # the owner adds a household-shared result
    assert [j.pk for j in album_jobs(viewer, album)] == [job.pk]
    job.shared = False
    job.save(update_fields=["shared"])
    assert not can_view(viewer, job)  # otto did not put it there: private again means private
    assert list(album_jobs(viewer, album)) == []
    assert [j.pk for j in album_jobs(other_member, album)] == [job.pk]  # still his own


def test_who_may_add_what(album, member, other_member, viewer, stranger, device, media):
    private_other = finished(stranger, device, media, prompt="sam's private")
    shared_other = finished(stranger, device, media, prompt="sam's shared", shared=True)
    running = make_job(other_member, device, state="running")
    no_result = make_job(other_member, device, state="done")
    mine = finished(member, device, media)
    with pytest.raises(PermissionDenied):
        svc.album_add_jobs(album=album, by=viewer, job_ids=[shared_other.pk])
    with pytest.raises(Http404):
        svc.album_add_jobs(album=album_for(stranger, album.pk), by=stranger, job_ids=[mine.pk])
    with pytest.raises(RequestInvalid) as refused:
        svc.album_add_jobs(
            album=album, by=other_member,
            job_ids=[private_other.pk, running.pk, no_result.pk, mine.pk, 999999, "7"],
        )  # fmt: skip
    errors = refused.value.errors
    assert errors["jobs[0]"] == [f"#{private_other.pk}: No such job."]  # not visible: no existence leak
    assert "finished job" in errors["jobs[1]"][0] and "finished job" in errors["jobs[2]"][0]
    assert errors["jobs[3]"] == [f"#{mine.pk}: No such job."]  # mia's private job: otto can't see it
    assert errors["jobs[4]"] == ["#999999: No such job."]
    assert errors["jobs[5]"] == ["A job's number."]
    assert not AlbumItem.objects.exists()  # all or nothing
    svc.album_add_jobs(album=album, by=other_member, job_ids=[shared_other.pk])
    with pytest.raises(RequestInvalid, match="already"):
        svc.album_add_jobs(album=album, by=member, job_ids=[shared_other.pk])


def test_admins_add_only_their_own_or_shared_results(album, member, admin_user, device, media):
    album_admin = svc.album_create(by=admin_user, name="Admin's")
    job = finished(member, device, media, prompt="mia's private")
    with pytest.raises(RequestInvalid, match="Only your own results"):
        svc.album_add_jobs(album=album_admin, by=admin_user, job_ids=[job.pk])


def test_who_may_remove_items(album, member, other_member, viewer, device, media):
    by_owner = finished(member, device, media)
    by_otto = finished(other_member, device, media)
    svc.album_add_jobs(album=album, by=member, job_ids=[by_owner.pk])
    svc.album_add_jobs(album=album, by=other_member, job_ids=[by_otto.pk])
    with pytest.raises(PermissionDenied):
        svc.album_remove_item(album=album, by=other_member, job_id=by_owner.pk)
    with pytest.raises(PermissionDenied):
        svc.album_remove_item(album=album, by=viewer, job_id=by_otto.pk)
    svc.album_remove_item(album=album, by=other_member, job_id=by_otto.pk)
    svc.album_add_jobs(album=album, by=other_member, job_ids=[by_otto.pk])
    svc.album_remove_item(album=album, by=member, job_id=by_otto.pk)  # the owner removes anything
    with pytest.raises(RequestInvalid, match="not in this album"):
        svc.album_remove_item(album=album, by=member, job_id=by_otto.pk)


def test_only_the_owner_renames_deletes_and_invites(album, member, other_member, viewer, stranger):
    for action in (
        lambda: svc.album_rename(album=album, by=other_member, name="Mine now"),
        lambda: svc.album_delete(album=album, by=viewer),
        lambda: svc.album_invite(album=album, by=other_member, username=stranger.username, role="viewer"),
        lambda: svc.album_remove_member(album=album, by=other_member, username=viewer.username),
    ):
        with pytest.raises(PermissionDenied):
            action()
    with pytest.raises(RequestInvalid, match="No one here"):
        svc.album_invite(album=album, by=member, username="nobody", role="viewer")
    with pytest.raises(RequestInvalid, match="One of viewer, contributor"):
        svc.album_invite(album=album, by=member, username=stranger.username, role="admin")
    with pytest.raises(RequestInvalid, match="owner"):
        svc.album_invite(album=album, by=member, username=member.username, role="viewer")
    with pytest.raises(RequestInvalid, match="name"):
        svc.album_rename(album=album, by=member, name="   ")
    assert svc.album_invite(album=album, by=member, username="VIC", role="contributor").role == "contributor"
    svc.album_remove_member(album=album, by=viewer, username=viewer.username)  # leaving
    with pytest.raises(Http404):
        album_for(viewer, album.pk)
    svc.album_delete(album=album, by=member)
    with pytest.raises(Http404):
        album_for(other_member, album.pk)


def test_a_job_deleted_through_v1_leaves_the_album(album, member, viewer, device, media):
    from django.utils import timezone

    job = finished(member, device, media)
    svc.album_add_jobs(album=album, by=member, job_ids=[job.pk])
    job.hidden_at = timezone.now()
    job.save(update_fields=["hidden_at"])
    assert list(album_jobs(viewer, album)) == [] and not can_view(viewer, job)


def test_album_jobs_sort_and_filter_with_one_join(album, member, other_member, device, media):
    video = finished(member, device, media)
    image = finished(member, device, media, kind="image")
    svc.album_add_jobs(album=album, by=member, job_ids=[video.pk, image.pk])
    other = svc.album_create(by=member, name="Other")
    svc.album_add_jobs(album=other, by=member, job_ids=[video.pk])  # in two albums: listed once here
    assert [j.pk for j in album_jobs(other_member, album)] == [image.pk, video.pk]
    assert [j.pk for j in album_jobs(other_member, album, oldest_first=True)] == [video.pk, image.pk]
    assert [j.pk for j in album_jobs(other_member, album, kind="image")] == [image.pk]
