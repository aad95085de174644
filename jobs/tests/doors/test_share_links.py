"""Share links are built on HUB_PUBLIC_URL when it is set (issue 11, "LAN"), else on the request's own address."""

from __future__ import annotations

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
