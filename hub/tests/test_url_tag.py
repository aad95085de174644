"""``{% url %}`` in every template is hub.templatetags.hub_urls': Django's tag whose answers are kept."""

from __future__ import annotations

import pytest
from django.template import Template, engines
from django.urls import NoReverseMatch, clear_script_prefix, reverse, set_script_prefix

from hub.templatetags import hub_urls


def render(source: str, **context) -> str:
    return engines["django"].from_string(source).render(context)


def test_every_template_gets_the_kept_tag_without_a_load():
    node = Template("{% url 'jobs-detail' 1 %}", engine=engines["django"].engine).nodelist[0]
    assert isinstance(node, hub_urls.KeptURLNode)


@pytest.mark.parametrize(
    ("source", "context", "expected"),
    [
        ("{% url 'dashboard' %}", {}, reverse("dashboard")),
        ("{% url 'jobs-detail' pk %}", {"pk": 42}, reverse("jobs-detail", args=[42])),
        ("{% url 'jobs-detail' job_id=pk %}", {"pk": 7}, reverse("jobs-detail", kwargs={"job_id": 7})),
        ("{% url name pk %}", {"name": "jobs-cancel", "pk": 3}, reverse("jobs-cancel", args=[3])),
        ("{% url 'jobs-detail' pk as u %}[{{ u }}]", {"pk": 5}, f"[{reverse('jobs-detail', args=[5])}]"),
        ("{% url 'no-such-route' as u %}[{{ u }}]", {}, "[]"),
    ],
)
def test_same_answers_as_djangos_tag(source, context, expected):
    assert render(source, **context) == expected
    assert render(source, **context) == expected  # the second time from the store


def test_a_missing_route_still_raises():
    with pytest.raises(NoReverseMatch):
        render("{% url 'no-such-route' %}")


def test_the_answer_is_kept_and_each_argument_has_its_own():
    hub_urls._kept.cache_clear()
    for pk in (1, 2, 1, 2, 1):
        assert render("{% url 'jobs-detail' pk %}", pk=pk) == reverse("jobs-detail", args=[pk])
    info = hub_urls._kept.cache_info()
    assert (info.misses, info.hits) == (2, 3)


def test_arguments_other_than_ints_and_strings_are_reversed_every_time():
    class Pk:
        def __str__(self) -> str:
            return "9"

    hub_urls._kept.cache_clear()
    assert render("{% url 'jobs-detail' pk %}", pk=Pk()) == reverse("jobs-detail", args=[9])
    assert hub_urls._kept.cache_info().currsize == 0


def test_the_script_prefix_is_part_of_the_key():
    try:
        set_script_prefix("/hub/")
        assert render("{% url 'jobs-detail' 4 %}") == "/hub/jobs/4/"
        clear_script_prefix()
        set_script_prefix("/")
        assert render("{% url 'jobs-detail' 4 %}") == "/jobs/4/"
    finally:
        set_script_prefix("/")


def test_escaped_as_djangos_tag():
    url = reverse("accounts-invitation-accept", args=["a&b"])
    assert "&" in url
    assert render("{% url 'accounts-invitation-accept' t %}", t="a&b") == url.replace("&", "&amp;")
    assert (
        render("{% autoescape off %}{% url 'accounts-invitation-accept' t %}{% endautoescape %}", t="a&b")
        == url
    )


def test_a_changed_urlconf_empties_the_store(settings):
    render("{% url 'dashboard' %}")
    assert hub_urls._kept.cache_info().currsize
    settings.ROOT_URLCONF = "hub.urls"  # setting_changed, as override_settings sends
    assert hub_urls._kept.cache_info().currsize == 0
