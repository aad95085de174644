"""The summary under the new-job form (/jobs/new/admission/) is limited per person (HUB_PREVIEW_RATE): each one
decodes the form's uploads, and six at once took a web worker from 155 to 704 MB."""

from __future__ import annotations

import pytest

from jobs.tests.doors.test_views_new import video_post

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _two_an_hour(settings, monkeypatch, redis_client):
    settings.HUB_PREVIEW_RATE = "2/h"
    monkeypatch.setattr("hub.ratelimit._clock", lambda: 3600 * 500_000 + 1.0)  # no hour boundary mid-test
    # Rolled-back tests reuse person ids, so one test's counter would leak into the next.
    for key in redis_client.scan_iter("*ratelimit:preview:*"):
        redis_client.delete(key)


def _summary(client, device):
    return client.post("/jobs/new/admission/", video_post(device), HTTP_HX_REQUEST="true")


def test_it_pauses_the_summary_past_the_rate_and_says_when_it_comes_back(member_client, device):
    assert [_summary(member_client, device).status_code for _ in range(2)] == [200, 200]
    third = _summary(member_client, device)
    html = third.content.decode()
    assert third.status_code == 429 and third["Retry-After"] == "3599"
    assert 'id="admission"' in html and "Summary paused." in html and "comes back in 3599 s" in html
    # The button is left as the last summary set it: nothing about the job was decided.
    assert 'id="job-form-actions"' not in html


def test_the_limit_is_per_person(member_client, other_client, device):
    for _ in range(2):
        _summary(member_client, device)
    assert _summary(member_client, device).status_code == 429
    assert _summary(other_client, device).status_code == 200


def test_the_form_asks_again_when_a_paused_summary_may_be_asked_for(member_client, device):
    html = member_client.get(f"/jobs/new/?device={device.pk}&kind=video").content.decode()
    assert 'hx-trigger="change, input delay:800ms, load, ask-again" data-ask-again' in html
