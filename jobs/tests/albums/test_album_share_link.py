"""An album's read-only link (issue 37 item 1): its owner makes and revokes it and sets its expiry and password
(the rules of a job's link, ``jobs.core.share_links``); anyone with it sees the album's results as its owner sees
them there and downloads them through the token, and nothing else: no other job's file, nothing once revoked."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.test import Client

from jobs.models import Album
from jobs.queue import albums as svc
from jobs.tests.albums.conftest import finished
from jobs.tests.ui_fixtures import add_artifact

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _link(client, album) -> str:
    """Make the album's link from its page, as its owner does; the path it shows."""
    response = client.post(f"/jobs/albums/{album.pk}/share-link/", {"enable": "1"}, follow=True)
    assert response.status_code == 200
    match = re.search(r'id="share-url" readonly value="http://testserver([^"]+)"', response.content.decode())
    assert match, "the album page shows the new link"
    return match.group(1)


def _options(client, album, **data):
    return client.post(
        f"/jobs/albums/{album.pk}/share-link/options/", {"expires": "keep", **data}, follow=True
    )


@pytest.fixture
def shared_album(album, member, other_member, device, media):
    """mia's album with her private beach (bytes known) and otto's private forest, each put there by its owner;
    the link's path."""
    beach = finished(member, device, media, prompt="our private beach")
    forest = finished(other_member, device, media, prompt="otto's quiet forest")
    svc.album_add_jobs(album=album, by=member, job_ids=[beach.pk])
    svc.album_add_jobs(album=album, by=other_member, job_ids=[forest.pk])
    return beach, forest, _link(client_of(member), album)


def test_anyone_with_the_link_sees_the_album_and_downloads_byte_for_byte(
    settings, album, member, device, media
):
    settings.HUB_PUBLIC_URL = ""
    beach = finished(member, device, media, prompt="our private beach")
    data = b"\x00\x00\x00\x18ftypmp42 the beach, every byte"
    video = add_artifact(beach, media, name="beach.mp4", data=data)
    svc.album_add_jobs(album=album, by=member, job_ids=[beach.pk])
    path = _link(client_of(member), album)
    album.refresh_from_db()
    assert path == f"/jobs/albums/shared/{album.share_token}/"

    visitor = Client()
    page = visitor.get(path)
    html = page.content.decode()
    assert page.status_code == 200 and "Summer" in html and "our private beach" in html
    file_url = f"{path}jobs/{beach.pk}/files/{video.pk}/"
    assert f'src="{file_url}"' in html or f'href="{file_url}?download=1"' in html
    got = visitor.get(f"{file_url}?download=1")
    assert got.status_code == 200 and b"".join(got.streaming_content) == data
    thumb = beach.artifacts.get(kind="thumb")
    assert f'poster="{path}jobs/{beach.pk}/files/{thumb.pk}/"' in html  # the thumbnail, through the token too
    assert visitor.get(f"{path}jobs/{beach.pk}/files/{thumb.pk}/").status_code == 200
    # The page shows no people and no controls of the album.
    assert "otto" not in html and "Invite" not in html and "share-revoke" not in html


def test_it_shows_what_the_owner_sees_there_and_no_other_jobs_files(
    shared_album, album, member, device, media
):
    beach, forest, path = shared_album
    html = Client().get(path).content.decode()
    assert (
        "our private beach" in html and "otto&#x27;s quiet forest" in html
    )  # both put there by their owners
    # A job that is not in the album: its file is a 404 through the album's token, even the owner's own.
    elsewhere = finished(member, device, media, prompt="not in the album")
    other_file = elsewhere.artifacts.get(kind="video")
    assert Client().get(f"{path}jobs/{elsewhere.pk}/files/{other_file.pk}/").status_code == 404
    # Nor does naming an album job with another job's file open it.
    assert Client().get(f"{path}jobs/{beach.pk}/files/{other_file.pk}/").status_code == 404
    # A result taken out of the album leaves the link at once.
    forest_file = forest.artifacts.get(kind="video")
    assert Client().get(f"{path}jobs/{forest.pk}/files/{forest_file.pk}/").status_code == 200
    svc.album_remove_item(album=album, by=member, job_id=forest.pk)
    assert Client().get(f"{path}jobs/{forest.pk}/files/{forest_file.pk}/").status_code == 404
    assert "quiet forest" not in Client().get(path).content.decode()


def test_a_household_result_someone_else_added_leaves_the_link_when_made_private(
    album, member, other_member, admin_user, device, media
):
    """The link shows what the owner sees as a member would, even when the owner is an admin."""
    from jobs.queue.services import job_set_shared

    admins_album = svc.album_create(by=admin_user, name="Ada's picks")
    shared = finished(other_member, device, media, prompt="a shared sunset", shared=True)
    svc.album_add_jobs(album=admins_album, by=admin_user, job_ids=[shared.pk])
    path = _link(client_of(admin_user), admins_album)
    assert "a shared sunset" in Client().get(path).content.decode()
    job_set_shared(job=shared, by=other_member, shared=False)
    assert "a shared sunset" not in Client().get(path).content.decode()
    sunset_file = shared.artifacts.get(kind="video")
    assert Client().get(f"{path}jobs/{shared.pk}/files/{sunset_file.pk}/").status_code == 404


def test_an_expired_link_is_410_until_set_to_never_expire(shared_album, album, member):
    beach, _, path = shared_album
    owner = client_of(member)
    _options(owner, album, expires="1")
    album.refresh_from_db()
    assert album.share_expires_at is not None
    assert Client().get(path).status_code == 200
    Album.objects.filter(pk=album.pk).update(share_expires_at=album.share_expires_at - dt.timedelta(days=2))
    page = Client().get(path)
    assert page.status_code == 410 and "This link has expired" in page.content.decode()
    assert "our private beach" not in page.content.decode()
    video = beach.artifacts.get(kind="video")
    assert Client().get(f"{path}jobs/{beach.pk}/files/{video.pk}/").status_code == 410
    assert "expired" in owner.get(f"/jobs/albums/{album.pk}/").content.decode()
    _options(owner, album, expires="never")
    assert Client().get(path).status_code == 200


def test_a_password_is_hashed_asked_for_and_unlocks_one_browser(shared_album, album, member):
    beach, _, path = shared_album
    _options(client_of(member), album, password="open sesame")
    album.refresh_from_db()
    assert album.share_password and "open sesame" not in album.share_password
    video = beach.artifacts.get(kind="video")
    visitor = Client()
    form = visitor.get(path)
    assert form.status_code == 200 and "This link needs a password" in form.content.decode()
    assert "shared this album" in form.content.decode() and "our private beach" not in form.content.decode()
    assert visitor.get(f"{path}jobs/{beach.pk}/files/{video.pk}/").status_code == 403
    wrong = visitor.post(path, {"password": "guess"})
    assert wrong.status_code == 403 and "not the password of this link" in wrong.content.decode()
    right = visitor.post(path, {"password": "open sesame"})
    assert right.status_code == 302 and right["Location"] == path
    assert "our private beach" in visitor.get(path).content.decode()
    assert visitor.get(f"{path}jobs/{beach.pk}/files/{video.pk}/").status_code == 200
    assert "needs a password" in Client().get(path).content.decode()  # another browser still asks


def test_password_guesses_are_rate_limited_per_link(settings, shared_album, album, member, redis_client):
    settings.HUB_SHARE_PASSWORD_RATE = "3/h"
    _, _, path = shared_album
    _options(client_of(member), album, password="open sesame")
    for n in range(3):
        assert Client().post(path, {"password": f"guess {n}"}).status_code == 403
    blocked = Client().post(path, {"password": "open sesame"})
    assert blocked.status_code == 429 and "Too many tries" in blocked.content.decode()
    assert int(blocked["Retry-After"]) > 0


def test_a_bad_password_is_a_message_not_a_change(shared_album, album, member):
    page = _options(client_of(member), album, password="abc")
    assert page.status_code == 200 and "4 to 128 characters" in page.content.decode()
    album.refresh_from_db()
    assert album.share_password == ""


def test_opens_are_counted_and_shown_to_the_owner_and_a_revoked_link_is_404(shared_album, album, member):
    beach, _, path = shared_album
    for _ in range(3):
        assert Client().get(path).status_code == 200
    video = beach.artifacts.get(kind="video")
    Client().get(f"{path}jobs/{beach.pk}/files/{video.pk}/")  # a file is not an open
    album.refresh_from_db()
    assert album.share_opens == 3
    owner = client_of(member)
    assert "Opened 3 times" in owner.get(f"/jobs/albums/{album.pk}/").content.decode()
    owner.post(f"/jobs/albums/{album.pk}/share-link/", {"enable": "0"})
    assert Client().get(path).status_code == 404
    assert Client().get(f"{path}jobs/{beach.pk}/files/{video.pk}/").status_code == 404
    assert Client().get("/jobs/albums/shared/no-such-token/").status_code == 404
    album.refresh_from_db()
    assert album.share_token == "" and album.share_opens == 0


def test_only_the_owner_makes_or_changes_the_link(album, member, other_member, viewer, stranger, admin_user):
    for person, status in ((stranger, 404), (admin_user, 404), (other_member, 403), (viewer, 403)):
        client = client_of(person)
        assert client.post(f"/jobs/albums/{album.pk}/share-link/", {"enable": "1"}).status_code == status
        album.refresh_from_db()
        assert album.share_token == ""
    path = _link(client_of(member), album)
    for person, status in ((stranger, 404), (other_member, 403)):
        client = client_of(person)
        response = client.post(f"/jobs/albums/{album.pk}/share-link/options/", {"password": "mine!!"})
        assert response.status_code == status
        assert client.post(f"/jobs/albums/{album.pk}/share-link/", {"enable": "0"}).status_code == status
    album.refresh_from_db()
    assert album.share_password == "" and Client().get(path).status_code == 200
    # Members don't see the link on the album page: it is the owner's to give.
    assert 'id="share-url"' not in client_of(viewer).get(f"/jobs/albums/{album.pk}/").content.decode()


def test_a_job_link_token_opens_no_album(settings, member_client, member, device, media):
    from jobs.queue.services import job_share_link

    job = job_share_link(job=finished(member, device, media), by=member, enable=True)
    assert Client().get(f"/jobs/albums/shared/{job.share_token}/").status_code == 404


def test_the_token_is_masked_in_log_lines(shared_album, album):
    from hub.logfilters import mask_tokens

    _, _, path = shared_album
    album.refresh_from_db()
    line = mask_tokens(f'"GET {path}jobs/1/files/2/ HTTP/1.1" 200')
    assert album.share_token not in line and "/jobs/albums/shared/***/jobs/1/files/2/" in line


def test_rest_patch_shares_and_revokes_for_the_owner_only(
    shared_album, album, member, other_member, stranger
):
    import json

    from hub.accounts.tokens import token_create

    def patch(user, body):
        _, raw = token_create(user=user, name="script", scopes=["read", "submit"])
        client = Client(headers={"Authorization": f"Bearer {raw}"})
        return client.patch(f"/api/albums/{album.pk}", json.dumps(body), content_type="application/json")

    _, _, old_path = shared_album
    assert patch(member, {"share": False}).json()["share_url"] is None
    assert Client().get(old_path).status_code == 404
    made = patch(member, {"share": True})
    assert made.status_code == 200
    url = made.json()["share_url"]
    album.refresh_from_db()
    assert url == f"http://testserver/jobs/albums/shared/{album.share_token}/"
    assert "our private beach" in Client().get(url.removeprefix("http://testserver")).content.decode()
    assert patch(member, {"share": True}).json()["share_url"] == url  # kept, not remade
    assert patch(other_member, {"share": False}).status_code == 403
    assert patch(stranger, {"share": False}).status_code == 404
    assert patch(member, {"share": "yes"}).status_code == 422
    member_view = patch(other_member, {"name": "x"})
    assert member_view.status_code == 403
    album.refresh_from_db()
    assert album.share_token and album.name == "Summer"
