"""Every template file compiles on its own. An included file is parsed only when a page renders it, so a
missing ``{% load %}`` (say, ``hub_time`` for ``|when``) would otherwise surface as a 500 on whichever page
first includes it with data (the sparkline did: only with NPU readings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.template.loader import get_template

TEMPLATES = Path(settings.BASE_DIR) / "templates"
NAMES = sorted(str(p.relative_to(TEMPLATES)) for p in TEMPLATES.rglob("*") if p.suffix in (".html", ".txt"))


@pytest.mark.parametrize("name", NAMES)
def test_the_template_compiles(name):
    get_template(name)


def test_every_template_is_listed():
    assert len(NAMES) > 40 and "jobs/_sparkline.html" in NAMES
