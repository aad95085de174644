"""Album pages (``jobs.doors.album_views``) and the access matrix, through the Django client.

Owner (mia), contributor (otto), viewer (vic) see the album and every result in it, private ones their owners put
there included, with their files and thumbnails; a stranger (sam) and an admin (ada) get 404 for the album page and
its changes (albums are personal: an admin sees every job anyway, through the gallery, but not others' albums);
the stranger also gets 404 for the files of a private result they only could have seen through the album.
"""

from __future__ import annotations

import pytest
from django.test import Client

from jobs.models import Album, AlbumItem, AlbumMember
from jobs.queue import albums as svc
from jobs.tests.albums.conftest import finished

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def beach(album, member, device, media):
    job = finished(member, device, media, prompt="our private beach")
    svc.album_add_jobs(album=album, by=member, job_ids=[job.pk])
    return job


def test_the_list_has_an_empty_state_and_a_nav_link(stranger):
    html = client_of(stranger).get("/jobs/albums/").content.decode()
    assert 'id="albums-mine-empty"' in html and 'id="albums-shared-empty"' in html
    assert 'href="/jobs/albums/"' in html


def test_the_list_shows_mine_and_shared_with_me(album, member, viewer, stranger):
    assert 'id="albums-mine"' in client_of(member).get("/jobs/albums/").content.decode()
    html = client_of(viewer).get("/jobs/albums/").content.decode()
    assert 'id="albums-shared"' in html and "Summer" in html and "by mia" in html
    assert "Summer" not in client_of(stranger).get("/jobs/albums/").content.decode()


def test_the_access_matrix(album, beach, member, other_member, viewer, stranger, admin_user):
    thumb = beach.artifacts.get(kind="thumb")
    video = beach.artifacts.get(kind="video")
    for person in (member, other_member, viewer):
        client = client_of(person)
        html = client.get(f"/jobs/albums/{album.pk}/").content.decode()
        assert f'id="job-{beach.pk}-card"' in html, person
        assert f'src="/jobs/{beach.pk}/files/{thumb.pk}/"' in html
        assert client.get(f"/jobs/{beach.pk}/").status_code == 200
        assert client.get(f"/jobs/{beach.pk}/files/{video.pk}/").status_code == 200
        assert client.get(f"/jobs/{beach.pk}/files/{thumb.pk}/").status_code == 200
    for person in (stranger, admin_user):
        client = client_of(person)
        assert client.get(f"/jobs/albums/{album.pk}/").status_code == 404
        assert client.post(f"/jobs/albums/{album.pk}/rename/", {"name": "x"}).status_code == 404
        assert client.get(f"/jobs/albums/{album.pk}/delete/").status_code == 404
        assert (
            client.post(f"/jobs/albums/{album.pk}/people/", {"user": "sam", "role": "viewer"}).status_code
            == 404
        )
        assert client.post(f"/jobs/albums/{album.pk}/items/remove/", {"job": beach.pk}).status_code == 404
    sam = client_of(stranger)
    assert sam.get(f"/jobs/{beach.pk}/").status_code == 404
    assert sam.get(f"/jobs/{beach.pk}/files/{video.pk}/").status_code == 404
    assert sam.get(f"/jobs/{beach.pk}/files/{thumb.pk}/").status_code == 404
    assert client_of(admin_user).get(f"/jobs/{beach.pk}/").status_code == 200  # admins see every job anyway
    assert Client().get(f"/jobs/albums/{album.pk}/").status_code == 302  # sign in first


def test_a_removed_member_gets_404_at_once(album, beach, member, viewer):
    vic = client_of(viewer)
    assert vic.get(f"/jobs/albums/{album.pk}/").status_code == 200
    response = client_of(member).post(f"/jobs/albums/{album.pk}/people/remove/", {"user": "vic"})
    assert response.status_code == 302
    assert vic.get(f"/jobs/albums/{album.pk}/").status_code == 404
    assert vic.get(f"/jobs/{beach.pk}/").status_code == 404


def test_create_rename_and_delete_with_a_confirmation(member):
    mia = client_of(member)
    response = mia.post("/jobs/albums/new/", {"name": "  Winter  "})
    album = Album.objects.get(owner=member)
    assert album.name == "Winter" and response["Location"] == f"/jobs/albums/{album.pk}/"
    assert (
        "Give the album a name." in mia.post("/jobs/albums/new/", {"name": ""}, follow=True).content.decode()
    )
    mia.post(f"/jobs/albums/{album.pk}/rename/", {"name": "Snow"})
    album.refresh_from_db()
    assert album.name == "Snow"
    page = mia.get(f"/jobs/albums/{album.pk}/delete/").content.decode()
    assert 'id="album-delete-confirm"' in page and Album.objects.filter(pk=album.pk).exists()
    assert mia.post(f"/jobs/albums/{album.pk}/delete/")["Location"] == "/jobs/albums/"
    assert not Album.objects.filter(pk=album.pk).exists()


def test_members_may_not_rename_delete_or_invite(album, other_member):
    otto = client_of(other_member)
    html = otto.post(f"/jobs/albums/{album.pk}/rename/", {"name": "Otto's"}, follow=True).content.decode()
    assert "Only the album&#x27;s owner" in html
    assert otto.get(f"/jobs/albums/{album.pk}/delete/").status_code == 403
    otto.post(f"/jobs/albums/{album.pk}/people/", {"user": "sam", "role": "viewer"})
    assert not AlbumMember.objects.filter(user__username="sam").exists()
    album.refresh_from_db()
    assert album.name == "Summer"


def test_inviting_by_username_and_a_clear_message_for_an_unknown_one(album, member, stranger):
    mia = client_of(member)
    html = mia.post(f"/jobs/albums/{album.pk}/people/", {"user": "nobody", "role": "viewer"}, follow=True)
    assert "No one here is called “nobody”." in html.content.decode()
    mia.post(f"/jobs/albums/{album.pk}/people/", {"user": "sam", "role": "contributor"})
    assert AlbumMember.objects.get(album=album, user=stranger).role == "contributor"
    assert client_of(stranger).get(f"/jobs/albums/{album.pk}/").status_code == 200


def test_a_member_may_leave(album, viewer):
    vic = client_of(viewer)
    assert vic.post(f"/jobs/albums/{album.pk}/people/remove/", {"user": "vic"})["Location"] == "/jobs/albums/"
    assert vic.get(f"/jobs/albums/{album.pk}/").status_code == 404


def test_add_to_album_from_the_job_page_and_the_gallery(album, member, other_member, device, media):
    job = finished(other_member, device, media, prompt="otto's sunset")
    otto = client_of(other_member)
    assert f'href="/jobs/albums/add/?job={job.pk}"' in otto.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="/jobs/albums/add/?job={job.pk}"' in otto.get("/jobs/").content.decode()
    chooser = otto.get(f"/jobs/albums/add/?job={job.pk}").content.decode()
    assert f'<option value="{album.pk}">Summer (mia\'s)</option>' in chooser
    response = otto.post("/jobs/albums/add/", {"job": job.pk, "album": album.pk})
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert AlbumItem.objects.filter(album=album, job=job, added_by=other_member).exists()
    again = otto.post("/jobs/albums/add/", {"job": job.pk, "album": album.pk}, follow=True).content.decode()
    assert "in this album already" in again
    otto.post("/jobs/albums/add/", {"job": job.pk, "new_name": "Otto's own"})
    assert AlbumItem.objects.filter(album__name="Otto's own", job=job).exists()


def test_add_to_album_refuses_a_job_one_may_not_see(album, member, stranger, device, media):
    job = finished(member, device, media)
    assert client_of(stranger).get(f"/jobs/albums/add/?job={job.pk}").status_code == 404
    assert (
        client_of(stranger).post("/jobs/albums/add/", {"job": job.pk, "album": album.pk}).status_code == 404
    )
    assert client_of(stranger).get("/jobs/albums/add/?job=abc").status_code == 404


def test_new_since_your_last_visit_sort_filter_and_pages(album, member, other_member, viewer, device, media):
    vic = client_of(viewer)
    first = vic.get(f"/jobs/albums/{album.pk}/").content.decode()
    assert 'id="album-empty"' in first
    fox = finished(other_member, device, media, prompt="fox")
    owl = finished(other_member, device, media, prompt="owl", kind="image")
    svc.album_add_jobs(album=album, by=other_member, job_ids=[fox.pk, owl.pk])
    html = vic.get(f"/jobs/albums/{album.pk}/").content.decode()
    assert html.count("New since your last visit") == 2
    browsing = vic.get(f"/jobs/albums/{album.pk}/?sort=oldest").content.decode()  # the same visit
    assert browsing.count("New since your last visit") == 2
    assert browsing.index(f"job-{fox.pk}-card") < browsing.index(f"job-{owl.pk}-card")
    newest = vic.get(f"/jobs/albums/{album.pk}/?sort=newest").content.decode()
    assert newest.index(f"job-{owl.pk}-card") < newest.index(f"job-{fox.pk}-card")
    kind = vic.get(f"/jobs/albums/{album.pk}/?kind=image").content.decode()
    assert f"job-{owl.pk}-card" in kind and f"job-{fox.pk}-card" not in kind
    assert (
        "New since your last visit" not in vic.get(f"/jobs/albums/{album.pk}/").content.decode()
    )  # next visit
    # otto added them: they are not news to him
    assert (
        "New since your last visit"
        not in client_of(other_member).get(f"/jobs/albums/{album.pk}/").content.decode()
    )
    partial = vic.get(f"/jobs/albums/{album.pk}/?kind=video", headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith('<section id="album-results"')


def test_it_pages(album, member, device, media, monkeypatch):
    from jobs.doors import album_views

    monkeypatch.setattr(album_views, "PAGE_SIZE", 2)
    jobs = [finished(member, device, media, prompt=f"n{i}") for i in range(3)]
    svc.album_add_jobs(album=album, by=member, job_ids=[j.pk for j in jobs])
    mia = client_of(member)
    first = mia.get(f"/jobs/albums/{album.pk}/").content.decode()
    assert 'id="album-next"' in first and "Page 1 of 2" in first
    second = mia.get(f"/jobs/albums/{album.pk}/?sort=newest&kind=&page=2").content.decode()
    assert f"job-{jobs[0].pk}-card" in second and f"job-{jobs[2].pk}-card" not in second
    assert mia.get(f"/jobs/albums/{album.pk}/?page=zzz").status_code == 200


def test_removing_an_item(album, beach, member, viewer):
    html = client_of(viewer).get(f"/jobs/albums/{album.pk}/").content.decode()
    assert "Remove from album" not in html  # a viewer removes nothing
    client_of(viewer).post(f"/jobs/albums/{album.pk}/items/remove/", {"job": beach.pk})
    assert AlbumItem.objects.filter(job=beach).exists()
    client_of(member).post(f"/jobs/albums/{album.pk}/items/remove/", {"job": beach.pk})
    assert not AlbumItem.objects.filter(job=beach).exists()
    assert client_of(viewer).get(f"/jobs/{beach.pk}/").status_code == 404


def test_the_album_page_reads_the_same_whatever_its_size(album, member, other_member, device, media):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    otto = client_of(other_member)
    svc.album_add_jobs(album=album, by=member, job_ids=[finished(member, device, media).pk])
    otto.get(f"/jobs/albums/{album.pk}/")  # the session's first visit settled
    with CaptureQueriesContext(connection) as one:
        assert otto.get(f"/jobs/albums/{album.pk}/").status_code == 200
    more = [finished(member, device, media).pk for _ in range(5)]
    svc.album_add_jobs(album=album, by=member, job_ids=more)
    with CaptureQueriesContext(connection) as six:
        html = otto.get(f"/jobs/albums/{album.pk}/").content.decode()
    assert html.count('class="job-card ') == 6
    assert len(six) == len(one), [q["sql"] for q in six.captured_queries]


def test_a_new_album_is_made_only_with_the_result_in_it(member, device):
    from jobs.tests.ui_fixtures import make_job

    running = make_job(member, device, state="running")
    mia = client_of(member)
    html = mia.post(
        "/jobs/albums/add/", {"job": running.pk, "new_name": "Early"}, follow=True
    ).content.decode()
    assert "Only a finished job with a result" in html
    assert not Album.objects.filter(name="Early").exists()
