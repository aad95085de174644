"""hub.widgets.LongSelect draws what Django's Select draws, without a template per option."""

import re

import pytest
from django import forms

from hub.widgets import LongSelect

CHOICES = [
    ("", "None <yet>"),
    ("a&b", 'A "quoted" & <b>'),
    ("Europe/Berlin", "Europe/Berlin"),
    ("7", "seven"),
]


def _same(a: str, b: str) -> bool:
    norm = lambda s: re.sub(r"\s+", " ", s).replace("> <", "><")  # noqa: E731 - whitespace between options only
    return norm(a) == norm(b)


@pytest.mark.parametrize("value", [None, "", "a&b", "Europe/Berlin", 7, "not-a-choice", ["7", "a&b"]])
@pytest.mark.parametrize("attrs", [None, {"id": "id_tz", "aria-describedby": "h<1>", "required": True}])
def test_it_renders_like_djangos_select(value, attrs):
    mine = LongSelect(choices=CHOICES).render("tz", value, attrs)
    django_s = forms.Select(choices=CHOICES).render("tz", value, attrs)
    assert _same(mine, django_s), (mine, django_s)


def test_only_the_chosen_option_is_marked_and_labels_are_escaped():
    html = LongSelect(choices=CHOICES).render("tz", "a&b")
    assert html.count(" selected") == 1
    assert '<option value="a&amp;b" selected>A &quot;quoted&quot; &amp; &lt;b&gt;</option>' in html


def test_grouped_choices_fall_back_to_djangos_select():
    grouped = [("Europe", [("Europe/Berlin", "Berlin"), ("Europe/Paris", "Paris")]), ("UTC", "UTC")]
    mine = LongSelect(choices=grouped).render("tz", "Europe/Paris")
    assert _same(mine, forms.Select(choices=grouped).render("tz", "Europe/Paris"))
    assert "<optgroup" in mine


def test_the_settings_page_time_zone_list_uses_it():
    from hub.accounts.forms import PersonalSettingsForm

    form = PersonalSettingsForm(hub_time_zone="UTC", initial={"time_zone": "Asia/Tokyo"})
    assert isinstance(form.fields["time_zone"].widget, LongSelect)
    html = str(form["time_zone"])
    assert '<option value="Asia/Tokyo" selected>Asia/Tokyo</option>' in html and html.count(" selected") == 1
