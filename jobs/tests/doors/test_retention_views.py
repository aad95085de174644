"""The Retention page: a person sees their own announced results (never another's), admins set rules and see
everyone's; a non-admin can't set a rule."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from jobs.models import Job, RetentionRule
from jobs.queue import retention
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db


def _old(owner, device, media, days, prompt):
    job = make_job(owner, device, state="done", prompt=prompt)
    when = timezone.now() - dt.timedelta(days=days)
    Job.objects.filter(pk=job.pk).update(created=when, finished_at=when)
    add_artifact(job, media)
    return job


def test_each_person_sees_their_own_announced_results_and_admins_everyones(
    admin_client, member_client, other_client, admin_user, member, other_member, device, media
):
    assert 'id="no-rule"' in member_client.get("/jobs/retention/").content.decode()
    mine = _old(member, device, media, 40, "mia-old-heron")
    theirs = _old(other_member, device, media, 40, "otto-old-secret")
    retention.rule_set(by=admin_user, user=None, keep_days=30, keep_gb=None)
    retention.retention_apply()
    page = member_client.get("/jobs/retention/").content.decode()
    assert f'id="notice-{mine.pk}"' in page and "mia-old-heron" in page and "older than 30 days" in page
    assert "otto-old-secret" not in page and 'id="rule-form"' not in page
    other = other_client.get("/jobs/retention/").content.decode()
    assert "mia-old-heron" not in other and f'id="notice-{theirs.pk}"' in other
    admin = admin_client.get("/jobs/retention/").content.decode()
    assert f'id="all-notice-{mine.pk}"' in admin and f'id="all-notice-{theirs.pk}"' in admin


def test_admins_set_rules_from_the_page_and_others_may_not(admin_client, member_client, member):
    assert member_client.post("/jobs/retention/rule/", {"keep_days": "5"}).status_code == 403
    assert not RetentionRule.objects.exists()
    done = admin_client.post("/jobs/retention/rule/", {"user": "mia", "keep_days": "14", "keep_gb": "2"})
    assert done.status_code == 302
    rule = RetentionRule.objects.get(user=member)
    assert (rule.keep_days, rule.keep_gb) == (14, 2.0)
    refused = admin_client.post("/jobs/retention/rule/", {"keep_days": "soon"}, follow=True)
    assert "Days: a whole number" in refused.content.decode()
    unknown = admin_client.post("/jobs/retention/rule/", {"user": "nobody", "keep_days": "3"}, follow=True)
    assert "No person called" in unknown.content.decode()
    admin_client.post("/jobs/retention/rule/", {"user": "mia", "keep_days": "", "keep_gb": ""})
    assert not RetentionRule.objects.exists()
