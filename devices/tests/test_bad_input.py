"""No 500 on bad input in the device pages (issue 10): the add-device race, invalid forms answer 400 with the
form (plain and htmx), and ids from the request."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from devices.models import Device
from devices.services import NAME_TAKEN, device_register

pytestmark = pytest.mark.django_db

TAKEN = "A device with that name already exists."


def add_post(name: str = "Living-room Tiiny", **over) -> dict:
    data = {
        "name": name,
        "kind": "tiiny",
        "base_url": "http://127.0.0.1:9",
        "api_key": "k",
        "night_start": "23:00",
        "night_end": "07:00",
    }
    data.update(over)
    return data


def quiet_client(user) -> Client:
    """Answers as the server would (a 500 page) instead of raising the view's exception."""
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def no_network(monkeypatch):
    """Adding a device tests its connection; nothing answers at 127.0.0.1:9 and the test needn't wait for it."""
    from devices import views
    from devices.services import ConnectionReport

    monkeypatch.setattr(
        views, "device_check_now", lambda *, device: ConnectionReport(False, "unreachable", "not reached")
    )


def test_adding_the_same_name_twice_is_a_form_error(admin_user, no_network):
    client = quiet_client(admin_user)
    assert client.post(reverse("devices-add"), add_post()).status_code == 302
    again = client.post(reverse("devices-add"), add_post())
    assert again.status_code == 400 and TAKEN in again.content.decode()
    assert Device.objects.count() == 1


def _create_between_check_and_insert(monkeypatch, name: str) -> None:
    """The race: this request's checks (the form's and the model's) pass, then another request inserts the
    same name before this one's INSERT runs."""
    from devices import forms

    real_full_clean = Device.full_clean

    def full_clean_then_lose_the_race(self, *args, **kwargs):
        real_full_clean(self, *args, **kwargs)
        Device.objects.create(name=name, kind="tiiny", base_url="http://127.0.0.1:8")

    monkeypatch.setattr(Device, "full_clean", full_clean_then_lose_the_race)
    monkeypatch.setattr(forms.DeviceForm, "clean_name", lambda self: self.cleaned_data["name"].strip())


def test_two_adds_at_once_with_one_name_are_a_form_error_not_a_500(admin_user, monkeypatch, no_network):
    _create_between_check_and_insert(monkeypatch, "Living-room Tiiny")
    response = quiet_client(admin_user).post(reverse("devices-add"), add_post())
    assert response.status_code == 400
    assert TAKEN in response.content.decode()
    assert Device.objects.filter(name="Living-room Tiiny").count() == 1  # the winner's


def test_a_rename_that_loses_the_race_is_a_form_error(admin_user, monkeypatch):
    device = device_register(name="Pocket", kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")
    _create_between_check_and_insert(monkeypatch, "Attic")
    response = quiet_client(admin_user).post(reverse("devices-edit", args=[device.pk]), add_post("Attic"))
    assert response.status_code == 400 and TAKEN in response.content.decode()
    device.refresh_from_db()
    assert device.name == "Pocket"


def test_the_service_says_the_same_to_every_door(monkeypatch):
    """``manage.py add_device`` and the API go through ``device_register`` too: a ValidationError, not a 500."""
    from django.core.exceptions import ValidationError

    _create_between_check_and_insert(monkeypatch, "Den")
    with pytest.raises(ValidationError) as caught:
        device_register(name="Den", kind="tiiny", base_url="http://127.0.0.1:9")
    assert caught.value.message_dict == {"name": [NAME_TAKEN]}


@pytest.mark.parametrize("htmx", [False, True])
def test_an_invalid_device_form_answers_400_with_the_form(admin_client, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = admin_client.post(reverse("devices-add"), add_post(base_url="gopher://x"), **headers)
    assert response.status_code == 400 and 'id="device-form"' in response.content.decode()
    device = device_register(name="Pocket", kind="tiiny", base_url="http://127.0.0.1:9")
    response = admin_client.post(reverse("devices-edit", args=[device.pk]), add_post(name=""), **headers)
    assert response.status_code == 400 and 'id="device-form"' in response.content.decode()


def test_the_connection_test_of_a_bad_form_is_html_htmx_can_swap(admin_client):
    response = admin_client.post(reverse("devices-add-test"), {"kind": "tiiny"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert 'id="test-result"' in response.content.decode()


@pytest.mark.parametrize("raw", ["%C2%B2", "%D9%A1%D9%A2", "9" * 25, "9" * 10_000, "-1", "1e3"])
def test_bad_device_ids_in_the_path_are_404(admin_user, raw):
    client = quiet_client(admin_user)
    for path in ("/devices/{}/", "/devices/{}/metrics.json", "/devices/{}/edit/"):
        assert client.get(path.format(raw)).status_code == 404, path


def test_an_unknown_chart_range_is_the_default_range(admin_client):
    device = device_register(name="Pocket", kind="tiiny", base_url="http://127.0.0.1:9")
    for value in ("²", "9" * 5000, "", "decade"):
        response = admin_client.get(reverse("devices-metrics", args=[device.pk]), {"range": value})
        assert response.status_code == 200 and response.json()["resolution"] == 10


@pytest.mark.browser
@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_htmx_shows_the_400_of_a_connection_test_in_the_page(signed_in_page, admin_user):
    """The "Test connection" button posts with htmx; its 400 (the form's errors) must land in the page,
    although htmx swaps no 4xx by default (static/js/hub.js opts in for HTML 400/422)."""
    page = signed_in_page(admin_user)
    page.goto("/devices/add/")
    page.fill("#id_base_url", "gopher://x")
    with page.expect_response(lambda r: r.url.endswith("/devices/add/test/")) as answer:
        page.click("text=Test connection")
    assert answer.value.status == 400
    page.wait_for_selector("#test-result .error", timeout=5000)
    assert "http" in page.inner_text("#test-result").lower()
