"""Albums through REST (/api/albums): real tokens, the whole Django stack, the same rules as the pages."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from hub.accounts.tokens import token_create
from jobs.models import Album, AlbumItem, AlbumMember
from jobs.queue import albums as svc
from jobs.tests.albums.conftest import finished
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def token_client(user, scopes=("read", "submit")) -> Client:
    _, raw = token_create(user=user, name="script", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


def send(client: Client, method: str, url: str, body=None):
    return getattr(client, method)(
        url, json.dumps(body) if body is not None else "", content_type="application/json"
    )


def test_create_list_get_rename_delete(member, viewer):
    mia = token_client(member)
    created = send(mia, "post", "/api/albums", {"name": "Summer"})
    assert created.status_code == 201
    body = created.json()
    assert (
        body["name"] == "Summer" and body["role"] == "owner" and body["items"] == [] and body["members"] == []
    )
    pk = body["id"]
    assert [a["id"] for a in mia.get("/api/albums").json()["items"]] == [pk]
    assert send(mia, "patch", f"/api/albums/{pk}", {"name": "Sun"}).json()["name"] == "Sun"
    assert mia.get(f"/api/albums/{pk}").json()["name"] == "Sun"
    assert send(mia, "delete", f"/api/albums/{pk}").status_code == 204
    assert mia.get(f"/api/albums/{pk}").status_code == 404


def test_bad_input_is_a_clear_422(member):
    mia = token_client(member)
    for body, field in (({}, "name"), ({"name": ""}, "name"), ({"name": "x", "extra": 1}, "extra")):
        response = send(mia, "post", "/api/albums", body)
        assert response.status_code == 422 and field in response.json()["errors"], response.json()
    assert mia.get("/api/albums/abc").status_code == 404


def test_items_and_members(album, member, other_member, viewer, stranger, device, media):
    mia, otto = token_client(member), token_client(other_member)
    vic = token_client(viewer, scopes=("read",))  # a household viewer's tokens only read
    mine = finished(member, device, media, prompt="mia's private")
    running = make_job(member, device, state="running")
    theirs = finished(stranger, device, media, prompt="sam's private")
    url = f"/api/albums/{album.pk}"
    added = send(mia, "post", f"{url}/items", {"jobs": [mine.pk]})
    assert added.status_code == 201 and [i["job"] for i in added.json()["items"]] == [mine.pk]
    refused = send(mia, "post", f"{url}/items", {"jobs": [mine.pk, running.pk, theirs.pk]})
    assert refused.status_code == 422
    errors = refused.json()["errors"]
    assert "already" in errors["jobs[0]"][0]
    assert "finished job" in errors["jobs[1]"][0]
    assert errors["jobs[2]"] == [f"#{theirs.pk}: No such job."]
    assert send(mia, "post", f"{url}/items", {"jobs": ["x"]}).status_code == 422
    svc.album_invite(album=album, by=member, username="sam", role="viewer")
    refused = send(token_client(stranger), "post", f"{url}/items", {"jobs": [theirs.pk]})
    assert (
        refused.status_code == 403 and "contributors" in refused.json()["detail"]
    )  # an album viewer adds nothing
    detail = vic.get(url).json()
    assert detail["role"] == "viewer" and detail["count"] == 1 and detail["items"][0]["added_by"] == "mia"
    assert {m["user"]: m["role"] for m in detail["members"]} == {
        "otto": "contributor",
        "sam": "viewer",
        "vic": "viewer",
    }
    assert vic.get(f"/api/jobs/{mine.pk}").status_code == 200  # the album's private result, through the album
    # people
    unknown = send(mia, "post", f"{url}/members", {"user": "nobody", "role": "viewer"})
    assert unknown.status_code == 422 and "No one here" in unknown.json()["errors"]["user"][0]
    bad_role = send(mia, "post", f"{url}/members", {"user": "sam", "role": "owner"})
    assert bad_role.status_code == 422 and "role" in bad_role.json()["errors"]
    assert send(otto, "post", f"{url}/members", {"user": "sam", "role": "viewer"}).status_code == 403
    assert send(mia, "post", f"{url}/members", {"user": "sam", "role": "viewer"}).json() == {
        "user": "sam", "role": "viewer",
    }  # fmt: skip
    assert send(mia, "delete", f"{url}/members/sam").status_code == 204
    assert send(mia, "delete", f"{url}/members/sam").status_code == 422  # not a member any more
    assert send(mia, "delete", f"{url}/items/{mine.pk}").status_code == 204
    assert send(mia, "delete", f"{url}/items/{mine.pk}").status_code == 422
    assert vic.get(f"/api/jobs/{mine.pk}").status_code == 404


def test_strangers_and_admins_get_404_for_every_route(album, member, stranger, admin_user, device, media):
    job = finished(member, device, media)
    svc.album_add_jobs(album=album, by=member, job_ids=[job.pk])
    url = f"/api/albums/{album.pk}"
    for person in (stranger, admin_user):
        client = token_client(person)
        assert client.get(url).status_code == 404
        assert client.get("/api/albums").json()["items"] == []
        assert send(client, "patch", url, {"name": "x"}).status_code == 404
        assert send(client, "delete", url).status_code == 404
        assert send(client, "post", f"{url}/items", {"jobs": [job.pk]}).status_code == 404
        assert send(client, "delete", f"{url}/items/{job.pk}").status_code == 404
        assert send(client, "post", f"{url}/members", {"user": "sam", "role": "viewer"}).status_code == 404
        assert send(client, "delete", f"{url}/members/otto").status_code == 404
        assert client.get(url).json()["detail"] == "No such album."
    assert token_client(stranger).get(f"/api/jobs/{job.pk}").status_code == 404
    assert Album.objects.filter(pk=album.pk, name="Summer").exists()
    assert AlbumItem.objects.filter(job=job).exists() and AlbumMember.objects.filter(album=album).count() == 2


def test_a_read_only_token_reads_but_changes_nothing(album, member):
    reader = token_client(member, scopes=("read",))
    assert reader.get(f"/api/albums/{album.pk}").status_code == 200
    assert send(reader, "post", "/api/albums", {"name": "x"}).status_code == 403
    assert send(reader, "patch", f"/api/albums/{album.pk}", {"name": "x"}).status_code == 403
    assert send(reader, "delete", f"/api/albums/{album.pk}/members/vic").status_code == 403
    assert AlbumMember.objects.filter(album=album).count() == 2


def test_a_member_may_leave_through_the_api(album, other_member):
    otto = token_client(other_member)
    assert send(otto, "delete", f"/api/albums/{album.pk}/members/otto").status_code == 204
    assert otto.get(f"/api/albums/{album.pk}").status_code == 404


def test_the_list_gives_each_album_its_role_in_a_fixed_number_of_queries(
    member, other_member, viewer, stranger
):
    """The list reads each person's role in the same query as the albums, however many albums they are in (a
    query per album shared with them made GET /api/albums over a hundred queries at 1,000 albums: bench_jobs.py)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def listed():
        with CaptureQueriesContext(connection) as ctx:
            items = otto.get("/api/albums").json()["items"]
        return {a["name"]: a["role"] for a in items}, len(ctx.captured_queries)

    otto = token_client(other_member)
    assert otto.get("/api/albums").status_code == 200  # the token's first use is recorded once: not counted
    svc.album_create(by=other_member, name="Otto's own")
    first = svc.album_create(by=member, name="Mia 0")
    svc.album_invite(album=first, by=member, username=other_member.username, role="contributor")
    roles, few = listed()
    assert roles == {"Otto's own": "owner", "Mia 0": "contributor"}
    for n in range(1, 6):
        album = svc.album_create(by=member if n % 2 else viewer, name=f"Shared {n}")
        svc.album_invite(
            album=album,
            by=album.owner,
            username=other_member.username,
            role="viewer" if n % 3 else "contributor",
        )
    svc.album_create(by=stranger, name="Not for otto")
    roles, many = listed()
    assert roles == {
        "Otto's own": "owner",
        "Mia 0": "contributor",
        "Shared 1": "viewer",
        "Shared 2": "viewer",
        "Shared 3": "contributor",
        "Shared 4": "viewer",
        "Shared 5": "viewer",
    }
    assert many == few
