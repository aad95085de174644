"""Groups in Chromium: a kids' group limited to one image model sees only it on the new-job page (the kinds, the
model choice), is told by name that a video is not theirs, and queues the picture. Against the live hub (ASGI) and
the Tiiny emulator's real capabilities."""

from __future__ import annotations

import pytest

from conftest import save_screenshot
from jobs.models import Job
from jobs.tests.doors.test_browser_jobs import off_loop
from jobs.tests.ui_fixtures import IMAGE

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ENABLED = "() => { const b = document.getElementById('job-submit'); return b && !b.disabled; }"
MODELS = (
    "() => Array.from(document.querySelectorAll('select[name=model] option, input[name=model]'))"
    ".map(e => e.value).filter(v => v)"
)
KINDS = "() => Array.from(document.querySelectorAll('.kind-tabs a')).map(a => a.textContent.trim())"


def _kids(member):
    from jobs.quotas import groups

    group = groups.group_save(by=None, name="kids", models=[IMAGE], kinds=["image"])
    groups.member_add(by=None, group=group, user=member)


def test_a_kids_group_sees_only_its_image_model_and_is_told_a_video_is_not_theirs(
    signed_in_page, member, pocket
):
    off_loop(_kids, member)
    page = signed_in_page(member)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto("/jobs/new/")
    page.wait_for_selector("#admission")
    assert page.evaluate(KINDS) == ["Image"]
    assert page.evaluate(MODELS) == [IMAGE]
    save_screenshot(page, "new-job-kids-group")

    page.goto(f"/jobs/new/?device={pocket.pk}&kind=video")
    page.wait_for_selector("#admission")
    assert "Your group may not use video jobs." in page.inner_text("body")
    assert page.evaluate(MODELS) == [IMAGE]

    page.fill("#id_prompt", "a kite over the sea")
    page.wait_for_function(ENABLED, timeout=15000)
    page.click("#job-submit")
    page.wait_for_url("**/jobs/*/", timeout=15000)
    job = off_loop(lambda: Job.objects.get())
    assert (job.kind, job.model_id) == ("image", IMAGE)
    assert problems == [], problems


def test_an_admin_makes_the_kids_group_on_the_groups_page(signed_in_page, admin_user, member, pocket):
    from hub.accounts.models import UserGroup

    page = signed_in_page(admin_user)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto("/groups/")
    assert page.is_visible("#groups-empty")
    page.fill("#id_name", "kids")
    page.check(f"#group-models input[value='{IMAGE}']")  # the choices: what the emulated Tiiny reports
    page.check("#group-kinds input[value='image']")
    page.fill("#id_shared_minutes_per_day", "60")
    page.click("#group-create")
    page.wait_for_url("**/groups/*/", timeout=15000)
    page.wait_for_selector("#members-empty")
    page.select_option("#member-add", "mia")
    page.click("#member-add-button")
    page.wait_for_selector("#group-members")
    save_screenshot(page, "groups-edit")
    group = off_loop(lambda: UserGroup.objects.prefetch_related("members").get())
    assert (group.model_ids, group.kinds, group.shared_minutes_per_day) == ([IMAGE], ["image"], 60)
    assert [u.username for u in off_loop(lambda: list(group.members.all()))] == ["mia"]
    assert problems == [], problems
