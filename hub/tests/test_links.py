"""The origin of links the hub mails or hands out (hub.links.link_origin): HUB_PUBLIC_URL, else a Host listed in
ALLOWED_HOSTS exactly, port included, or a listed name on the port the hub serves on, else none."""

from __future__ import annotations

import pytest
from django.core.exceptions import DisallowedHost
from django.test import RequestFactory

from hub.links import NoLinkOrigin, link_origin, served_origin


def _request(host: str, *, secure: bool = False):
    return RequestFactory().get("/", HTTP_HOST=host, secure=secure)


@pytest.fixture(autouse=True)
def unset(settings):
    settings.HUB_PUBLIC_URL = ""
    settings.ALLOWED_HOSTS = ["hub.lan", "hub.lan:8000", ".example.com", "192.168.1.20"]
    return settings


def test_it_takes_hub_public_url_whatever_the_host(settings):
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    assert link_origin(_request("sub.example.com:6666")) == "https://hub.example.lan"


def test_it_takes_a_host_listed_exactly_with_its_port():
    assert link_origin(_request("hub.lan:8000")) == "http://hub.lan:8000"
    assert link_origin(_request("HUB.lan")) == "http://HUB.lan"  # host names know no case
    assert link_origin(_request("hub.lan", secure=True)) == "https://hub.lan"


def test_it_takes_a_listed_name_on_the_port_the_hub_serves_on(settings):
    """A plain make up: 127.0.0.1 is listed, the hub serves on HUB_PORT, and the People page is asked there."""
    settings.HUB_PORT = 8123
    assert link_origin(_request("192.168.1.20:8123")) == "http://192.168.1.20:8123"
    with pytest.raises(NoLinkOrigin):
        link_origin(_request("192.168.1.20:8124"))


def test_it_refuses_another_port_of_a_listed_name():
    # Django's own check lets "192.168.1.20:6666" in (it ignores ports): a link there reaches whatever else
    # listens on that machine.
    with pytest.raises(NoLinkOrigin) as caught:
        link_origin(_request("192.168.1.20:6666"))
    assert "HUB_PUBLIC_URL" in str(caught.value.messages) and "192.168.1.20:6666" in caught.value.fix
    assert "192.168.1.20:6666" not in " ".join(caught.value.messages)  # the plain message names no Host


def test_it_refuses_a_host_that_only_a_pattern_allows():
    with pytest.raises(NoLinkOrigin):
        link_origin(_request("attacker.example.com"))
    with pytest.raises(NoLinkOrigin):
        link_origin(_request("example.com"))


def test_a_host_django_refuses_never_gets_as_far(settings):
    with pytest.raises(DisallowedHost):
        link_origin(_request("evil.test"))


def test_without_a_request_it_is_the_address_the_hub_serves_on(settings):
    settings.HUB_HOST, settings.HUB_PORT, settings.HUB_HTTPS = "192.168.1.20", 8000, False
    assert link_origin() == served_origin() == "http://192.168.1.20:8000"
    settings.HUB_HOST, settings.HUB_PORT, settings.HUB_HTTPS = "hub.lan", 443, True
    assert link_origin() == "https://hub.lan"
    settings.HUB_HOST = "0.0.0.0"  # a wildcard bind is no address to open: the machine's name instead
    assert "0.0.0.0" not in link_origin()
