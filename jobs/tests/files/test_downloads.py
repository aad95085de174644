"""Result files over HTTP: byte ranges, revalidation and HEAD, for the private and the shared-link door alike.

Every case runs twice, through ``/jobs/<job>/files/<id>/`` signed in as the owner and through
``/jobs/shared/<token>/files/<id>/`` with no session, because both go through ``artifact_response``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest
from django.test import AsyncClient, Client
from django.utils.http import http_date

from jobs.queue.services import job_share_link
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db

SIZE = 10_000
DATA = bytes(i * 7 % 251 for i in range(SIZE))  # no repeats at small strides, so an offset error shows


@dataclass
class Door:
    client: Client
    url: str
    artifact: object
    job: object


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture(params=["private", "public"])
def door(request, member, device, media):
    job = make_job(member, device, state="done")
    art = add_artifact(job, media, data=DATA)
    art.sha256 = "ab" * 32
    art.save(update_fields=["sha256"])
    if request.param == "private":
        return Door(request.getfixturevalue("member_client"), f"/jobs/{job.pk}/files/{art.pk}/", art, job)
    job = job_share_link(job=job, by=member, enable=True)
    return Door(Client(), f"/jobs/shared/{job.share_token}/files/{art.pk}/", art, job)


def get(door: Door, **headers):
    return door.client.get(door.url, headers=headers)


# -- the whole file ----------------------------------------------------------------------------------------
def test_the_whole_file_advertises_ranges_and_validators(door):
    response = get(door)
    assert response.status_code == 200
    assert body(response) == DATA
    assert response["Accept-Ranges"] == "bytes"
    assert response["Content-Length"] == str(SIZE)
    assert response["Content-Type"] == "video/mp4"
    assert response["Cache-Control"] == "private, no-cache"
    assert response["ETag"] == f'"{"ab" * 20}-{SIZE:x}"'
    assert response["Last-Modified"].endswith("GMT")
    assert response["Content-Disposition"] == 'inline; filename="video.mp4"'
    assert "Content-Range" not in response


def test_a_download_is_an_attachment_and_still_ranged(door):
    response = door.client.get(door.url + "?download=1", headers={"Range": "bytes=0-9"})
    assert response.status_code == 206 and body(response) == DATA[:10]
    assert response["Content-Disposition"] == 'attachment; filename="video.mp4"'


# -- the range forms browsers send ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec,start,end",
    [
        ("0-1", 0, 1),  # Safari's probe
        ("100-", 100, SIZE - 1),  # Chromium's open range
        ("-500", SIZE - 500, SIZE - 1),  # suffix: the last 500 bytes (MP4 moov at the end)
        ("0-999999999", 0, SIZE - 1),  # past the end: clamped
        ("9999-", SIZE - 1, SIZE - 1),  # the very last byte
        ("-20000", 0, SIZE - 1),  # a suffix longer than the file is the whole file
        ("  BYTES = 5 - 9 ", 5, 9),  # unit is case-insensitive, whitespace tolerated
    ],
)
def test_a_single_range_gets_206_with_exactly_those_bytes(door, spec, start, end):
    response = get(door, Range=spec if "=" in spec else f"bytes={spec}")
    assert response.status_code == 206
    assert body(response) == DATA[start : end + 1]
    assert response["Content-Range"] == f"bytes {start}-{end}/{SIZE}"
    assert response["Content-Length"] == str(end - start + 1)
    assert response["Accept-Ranges"] == "bytes" and response["Content-Type"] == "video/mp4"
    assert response["ETag"].startswith('"ab')


@pytest.mark.parametrize(
    "spec", ["bytes=5000000-", f"bytes={SIZE}-", f"bytes={SIZE}-{SIZE + 10}", "bytes=-0"]
)
def test_a_range_outside_the_file_gets_416(door, spec):
    response = get(door, Range=spec)
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{SIZE}"
    assert response["Accept-Ranges"] == "bytes"
    assert str(SIZE) in response.content.decode()


@pytest.mark.parametrize(
    "spec",
    [
        "bytes=abc",
        "bytes=5-3",
        "bytes=-",
        "items=0-5",
        "bytes=0-1,5-9",
        "bytes=1-2-3",
        "bytes=" + "9" * 40 + "-",
    ],
)
def test_malformed_or_multiple_ranges_get_the_whole_file(door, spec):
    response = get(door, Range=spec)
    assert response.status_code == 200
    assert body(response) == DATA and "Content-Range" not in response


# -- conditional requests -----------------------------------------------------------------------------------
def test_if_range_with_the_current_etag_or_date_honours_the_range(door):
    first = get(door)
    for validator in (first["ETag"], first["Last-Modified"]):
        response = get(door, Range="bytes=10-19", **{"If-Range": validator})
        assert response.status_code == 206 and body(response) == DATA[10:20]


def test_if_range_that_no_longer_matches_gets_the_full_file(door):
    first = get(door)
    for stale in ('"something-else"', "W/" + first["ETag"], http_date(0)):
        response = get(door, Range="bytes=10-19", **{"If-Range": stale})
        assert response.status_code == 200 and body(response) == DATA, stale


def test_if_none_match_and_if_modified_since_answer_304(door):
    first = get(door)
    for headers in (
        {"If-None-Match": first["ETag"]},
        {"If-None-Match": f'"nope", {first["ETag"]}'},
        {"If-Modified-Since": first["Last-Modified"]},
        {"If-None-Match": first["ETag"], "Range": "bytes=0-1"},
    ):
        response = get(door, **headers)
        assert response.status_code == 304, headers
        assert response.content == b""
        assert response["ETag"] == first["ETag"] and response["Cache-Control"] == "private, no-cache"
    assert get(door, **{"If-None-Match": '"nope"'}).status_code == 200
    assert get(door, **{"If-Modified-Since": http_date(0)}).status_code == 200


def test_if_match_that_fails_gets_412(door):
    assert get(door, **{"If-Match": '"nope"'}).status_code == 412


def test_the_etag_changes_when_the_file_does(door, media):
    before = get(door)["ETag"]
    path = media / str(door.artifact.file)
    path.write_bytes(DATA + b"more")
    after = get(door)
    assert after["ETag"] != before and after["Content-Length"] == str(SIZE + 4)
    assert get(door, **{"If-None-Match": before}).status_code == 200


# -- HEAD ---------------------------------------------------------------------------------------------------
def test_head_answers_the_headers_a_get_would(door):
    response = door.client.head(door.url)
    assert response.status_code == 200 and response.content == b""
    assert response["Content-Length"] == str(SIZE) and response["Accept-Ranges"] == "bytes"
    ranged = door.client.head(door.url, headers={"Range": "bytes=100-"})
    assert ranged.status_code == 206 and ranged.content == b""
    assert ranged["Content-Range"] == f"bytes 100-{SIZE - 1}/{SIZE}"
    assert ranged["Content-Length"] == str(SIZE - 100)


def test_other_methods_are_refused(door):
    assert door.client.post(door.url).status_code == 405


# -- access is unchanged ------------------------------------------------------------------------------------
def test_ranges_and_heads_are_refused_to_other_members_and_strangers(other_client, member, device, media):
    job = make_job(member, device, state="done")
    art = add_artifact(job, media, data=DATA)
    url = f"/jobs/{job.pk}/files/{art.pk}/"
    assert other_client.get(url, headers={"Range": "bytes=0-1"}).status_code == 404
    assert other_client.head(url).status_code == 404
    anon = Client().get(url, headers={"Range": "bytes=0-1"})
    assert anon.status_code == 302 and "/accounts/login/" in anon["Location"]
    assert Client().head(url).status_code == 302


def test_a_revoked_link_stops_serving_ranges_at_once(member, device, media):
    job = make_job(member, device, state="done")
    art = add_artifact(job, media, data=DATA)
    token = job_share_link(job=job, by=member, enable=True).share_token
    url = f"/jobs/shared/{token}/files/{art.pk}/"
    anon = Client()
    etag = anon.get(url)["ETag"]
    assert anon.get(url, headers={"Range": "bytes=0-1"}).status_code == 206
    job_share_link(job=job, by=member, enable=False)
    assert anon.get(url, headers={"Range": "bytes=0-1"}).status_code == 404
    assert anon.get(url, headers={"If-None-Match": etag}).status_code == 404  # no 304 leak either
    assert anon.get(f"/jobs/shared/{token}/files/{art.pk + 1}/").status_code == 404


def test_a_missing_file_is_404_not_500(member_client, member, device, media):
    job = make_job(member, device, state="done")
    art = add_artifact(job, media, data=DATA)
    (media / str(art.file)).unlink()
    assert (
        member_client.get(f"/jobs/{job.pk}/files/{art.pk}/", headers={"Range": "bytes=0-1"}).status_code
        == 404
    )


# -- ASGI: streamed asynchronously in chunks ----------------------------------------------------------------
@pytest.mark.django_db(transaction=True)  # the view runs in asgiref's thread, on its own connection
async def test_under_asgi_it_streams_chunks_without_collecting_the_file(member, device, media):
    from asgiref.sync import sync_to_async

    from jobs.files.downloads import CHUNK

    big = bytes(range(256)) * (CHUNK * 3 // 256 + 7)  # a bit over three chunks
    job = await sync_to_async(make_job)(member, device, state="done")
    art = await sync_to_async(add_artifact)(job, media, data=big)
    client = AsyncClient()
    await client.aforce_login(member)
    url = f"/jobs/{job.pk}/files/{art.pk}/"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Django warns when it must list() a sync iterator under ASGI
        response = await client.get(url, headers={"Range": "bytes=1-"})
        parts = [part async for part in response.streaming_content]
    assert response.status_code == 206 and response.is_async
    assert b"".join(parts) == big[1:] and len(parts) == 4
    assert max(len(p) for p in parts) == CHUNK
