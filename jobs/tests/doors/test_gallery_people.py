"""The gallery's person filter lists exactly the people whose jobs the viewer sees (``jobs.doors.filters``)."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def _people(client) -> list[str]:
    html = client.get("/jobs/").content.decode()
    select = re.search(r'<select name="person".*?</select>', html, re.S).group(0)
    return re.findall(r'<option value="([^"]*)"', select)


def test_the_person_list_names_whose_jobs_one_may_see(
    admin_user, member, other_member, viewer, member_client, other_client, admin_client, device
):
    from django.test import Client

    make_job(member, device, prompt="mia's private fox")
    make_job(other_member, device, prompt="otto's shared owl", shared=True)
    make_job(viewer, device, prompt="vic's deleted one", hidden_at=timezone.now())
    viewer_client = Client()
    viewer_client.force_login(viewer)
    assert _people(member_client) == ["", "mia", "otto"]  # her own, and otto's shared one
    assert _people(other_client) == ["", "otto"]  # mia's only job is private
    assert _people(viewer_client) == ["", "otto"]  # vic's only job is deleted: gone for him too
    assert _people(admin_client) == ["", "mia", "otto"]  # every job but the deleted ones
