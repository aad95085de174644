"""The favicon and the web app manifest: answered before sign-in, cacheable, and linked from every page."""

from __future__ import annotations

import io
import json

import pytest
from django.test import Client
from PIL import Image

pytestmark = pytest.mark.django_db


def test_favicon_ico_is_an_icon_anyone_may_fetch():
    response = Client().get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert response["Cache-Control"] == "public, max-age=86400"
    icon = Image.open(io.BytesIO(response.content))
    assert icon.format == "ICO" and (32, 32) in icon.info["sizes"]
    assert Client().head("/favicon.ico").status_code == 200
    assert Client().post("/favicon.ico").status_code == 405


def test_the_manifest_lets_a_phone_add_the_hub_to_its_home_screen():
    response = Client().get("/manifest.webmanifest")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/manifest+json"
    assert response["Cache-Control"] == "public, max-age=86400"
    data = json.loads(response.content)
    assert data["name"] == "Tiiny Hub" and data["start_url"] == "/" and data["display"] == "standalone"
    assert data["theme_color"] == "#2456a6"  # --accent in static/css/hub.css
    sizes = {icon["sizes"]: icon["src"] for icon in data["icons"]}
    assert {"192x192", "512x512"} <= sizes.keys()
    for size in ("192x192", "512x512"):
        src = sizes[size]
        assert src.startswith("/static/img/")
        png = Client().get(src)  # WhiteNoise serves it, also before sign-in
        assert png.status_code == 200
        image = Image.open(io.BytesIO(b"".join(png.streaming_content)))
        assert f"{image.width}x{image.height}" == size and image.format == "PNG"


def test_every_page_links_the_icons_and_manifest(member_client):
    for html in (
        Client().get("/accounts/login/").content.decode(),
        member_client.get("/accounts/password_change/").content.decode(),
    ):
        assert '<link rel="manifest" href="/manifest.webmanifest">' in html
        assert 'rel="icon" href="/static/img/favicon.svg" type="image/svg+xml"' in html
        assert 'sizes="32x32"' in html and 'rel="apple-touch-icon"' in html
        assert '<meta name="theme-color" content="#2456a6">' in html
