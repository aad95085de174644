"""Share links are built on HUB_PUBLIC_URL when it is set (issue 11, "LAN"), else on the request's own address."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys

import pytest
from django.test import Client

from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db


def _share_url(client, job) -> str:
    response = client.post(f"/jobs/{job.pk}/share-link/", {"enable": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    match = re.search(r'id="share-url" readonly value="([^"]+)"', response.content.decode())
    assert match, "the actions box shows the new link"
    return match.group(1)


def test_it_builds_the_link_on_the_public_url_when_set(settings, member_client, member, device):
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    job = make_job(member, device, state="done")
    url = _share_url(member_client, job)
    job.refresh_from_db()
    assert url == f"https://hub.example.lan/jobs/shared/{job.share_token}/"
    # The job page shows the same link afterwards.
    assert f'value="{url}"' in member_client.get(f"/jobs/{job.pk}/").content.decode()


def test_it_keeps_a_path_prefix_of_the_public_url(settings, member_client, member, device):
    settings.HUB_PUBLIC_URL = "http://192.168.1.20:8000/hub"
    job = make_job(member, device, state="done")
    job_token_url = _share_url(member_client, job)
    job.refresh_from_db()
    assert job_token_url == f"http://192.168.1.20:8000/hub/jobs/shared/{job.share_token}/"


def test_it_uses_the_request_address_without_a_public_url(settings, member_client, member, device):
    settings.HUB_PUBLIC_URL = ""
    job = make_job(member, device, state="done")
    url = _share_url(member_client, job)
    job.refresh_from_db()
    assert url == f"http://testserver/jobs/shared/{job.share_token}/"


def test_the_public_link_opens_the_shared_result(settings, member_client, member, device, media):
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    job = make_job(member, device, state="done", prompt="a fox for the neighbours")
    add_artifact(job, media)
    path = _share_url(member_client, job).removeprefix("https://hub.example.lan")
    page = Client().get(path)
    assert page.status_code == 200 and b"a fox for the neighbours" in page.content


@pytest.mark.parametrize(
    "value,expected",
    [
        ("https://hub.example.lan/", "https://hub.example.lan"),
        ("http://10.0.0.5:8000", "http://10.0.0.5:8000"),
    ],
)
def test_the_setting_is_read_and_trimmed(value, expected):
    code = "import django; django.setup(); from django.conf import settings; print(settings.HUB_PUBLIC_URL)"
    env = {**os.environ, "HUB_PUBLIC_URL": value, "DJANGO_SETTINGS_MODULE": "hub.settings"}
    env.setdefault("HUB_SECRET_KEY", "x" * 50)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


@pytest.mark.parametrize("value", ["ftp://hub.lan", "hub.lan", "https://"])
def test_a_malformed_public_url_stops_start_up_with_one_line(value):
    env = {**os.environ, "HUB_PUBLIC_URL": value, "HUB_SECRET_KEY": "x" * 50}
    out = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "HUB_PUBLIC_URL" in out.stderr and "Traceback" not in out.stderr


# -- expiry, password and opens (issue 37) ----------------------------------------------------------------------
def _link(member_client, job) -> str:
    _share_url(member_client, job)
    job.refresh_from_db()
    return f"/jobs/shared/{job.share_token}/"


def _options(member_client, job, **data):
    return member_client.post(f"/jobs/{job.pk}/share-link/options/", data, HTTP_HX_REQUEST="true")


@pytest.fixture
def linked(member_client, member, device, media):
    job = make_job(member, device, state="done", prompt="a fox for the neighbours")
    art = add_artifact(job, media, data=b"fox bytes")
    return job, art, _link(member_client, job)


def test_an_expired_link_says_so_with_410_and_its_files_stop(member_client, linked):
    job, art, path = linked
    assert _options(member_client, job, expires="1").status_code == 200
    job.refresh_from_db()
    assert job.share_expires_at is not None
    assert Client().get(path).status_code == 200  # not yet
    job.share_expires_at = job.share_expires_at - dt.timedelta(days=2)  # its day has passed
    job.save(update_fields=["share_expires_at"])
    page = Client().get(path)
    assert page.status_code == 410 and "This link has expired" in page.content.decode()
    assert "a fox for the neighbours" not in page.content.decode()
    assert Client().get(f"{path}files/{art.pk}/").status_code == 410
    # "Never expires" brings it back; the owner's page shows the state.
    _options(member_client, job, expires="never")
    assert Client().get(path).status_code == 200
    assert "never expires" in member_client.get(f"/jobs/{job.pk}/").content.decode()


def test_a_revoked_or_unknown_link_is_still_404(member_client, linked):
    job, _, path = linked
    member_client.post(f"/jobs/{job.pk}/share-link/", {"enable": "0"})
    assert Client().get(path).status_code == 404
    assert Client().get("/jobs/shared/no-such-token/").status_code == 404


def test_a_password_is_stored_hashed_and_asked_for(member_client, linked):
    job, art, path = linked
    assert _options(member_client, job, password="open sesame").status_code == 200
    job.refresh_from_db()
    assert job.share_password and "open sesame" not in job.share_password
    assert job.share_password.startswith(("pbkdf2", "argon2", "bcrypt", "scrypt", "md5"))
    visitor = Client()
    form = visitor.get(path)
    assert form.status_code == 200 and "This link needs a password" in form.content.decode()
    assert "a fox for the neighbours" not in form.content.decode()
    assert visitor.get(f"{path}files/{art.pk}/").status_code == 403
    wrong = visitor.post(path, {"password": "guess"})
    assert wrong.status_code == 403 and "not the password of this link" in wrong.content.decode()
    right = visitor.post(path, {"password": "open sesame"})
    assert right.status_code == 302 and right["Location"] == path
    assert "a fox for the neighbours" in visitor.get(path).content.decode()
    assert b"".join(visitor.get(f"{path}files/{art.pk}/").streaming_content) == b"fox bytes"
    # Another browser still has to give it; a new password locks the first one out again.
    assert "needs a password" in Client().get(path).content.decode()
    _options(member_client, job, password="another one")
    assert "needs a password" in visitor.get(path).content.decode()
    # Removing it opens the link to anyone who has it.
    _options(member_client, job, remove_password="1")
    assert "a fox for the neighbours" in Client().get(path).content.decode()


def test_password_guesses_are_rate_limited_per_link(settings, member_client, linked, redis_client):
    settings.HUB_SHARE_PASSWORD_RATE = "3/h"
    job, _, path = linked
    _options(member_client, job, password="open sesame")
    for n in range(3):
        assert Client().post(path, {"password": f"guess {n}"}).status_code == 403
    blocked = Client().post(path, {"password": "open sesame"})  # even the right one waits: a fresh browser
    assert blocked.status_code == 429 and "Too many tries" in blocked.content.decode()
    assert int(blocked["Retry-After"]) > 0


def test_a_bad_password_or_expiry_is_a_message(member_client, linked):
    job, _, _ = linked
    short = _options(member_client, job, password="abc")
    assert short.status_code == 400 and "4 to 128 characters" in short.content.decode()
    odd = _options(member_client, job, expires="forever")
    assert odd.status_code == 400 and "Choose when the link expires" in odd.content.decode()


def test_opens_are_counted_and_shown_to_the_owner(member_client, linked):
    job, art, path = linked
    for _ in range(3):
        assert Client().get(path).status_code == 200
    Client().get(f"{path}files/{art.pk}/")  # a file is not an open
    job.refresh_from_db()
    assert job.share_opens == 3
    assert "Opened 3 times" in member_client.get(f"/jobs/{job.pk}/").content.decode()
    # A new link starts again from nothing.
    member_client.post(f"/jobs/{job.pk}/share-link/", {"enable": "0"})
    _link(member_client, job)
    job.refresh_from_db()
    assert job.share_opens == 0 and job.share_expires_at is None and job.share_password == ""


def test_only_the_owner_sets_the_options(other_client, admin_client, linked):
    job, _, _ = linked
    assert other_client.post(f"/jobs/{job.pk}/share-link/options/", {"password": "mine!"}).status_code == 404
    job.refresh_from_db()
    assert job.share_password == ""
