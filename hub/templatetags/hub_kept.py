"""``{% kept "jobs/_fragments.html#job-card" card %}``: a partial drawn once for each distinct value, then reused.

A list page draws the same entries on every load and for every person who sees them: the gallery's 24 cards
were ~6 ms of its ~25 ms of CPU, all of it the template engine drawing what it drew a moment before.

The partial is drawn with a context of its own holding only ``c`` (the value) and a stand-in for the CSRF
token: no request, no user, no context processors, nothing from the page around it. What it draws is then a
function of the value, the template, the time zone and the language active for the render, and those four are
the key. The value must be hashable and hold everything the partial shows (a frozen dataclass of plain fields,
e.g. ``jobs.doors.filters.GalleryCard``); anything else the partial reads is not there, and draws as nothing. The
CSRF token, the one thing that differs per request, is put in after, from the page's context.

What is kept lives in each process (an LRU of ``KEPT_MAX`` drawings, ~1 KB each); templates don't change while
a process runs.
"""

from __future__ import annotations

import functools
import secrets

from django import template
from django.template.loader import get_template
from django.utils import timezone, translation
from django.utils.safestring import mark_safe

register = template.Library()

KEPT_MAX = 4096
#: Where the partial's ``{% csrf_token %}`` puts the token, until the page's replaces it. Unguessable, so no text
#: a person wrote (a prompt in a card) can carry it.
CSRF_STAND_IN = f"csrf{secrets.token_hex(16)}"


@functools.lru_cache(maxsize=KEPT_MAX)
def _drawn(template_name: str, value, zone: str, language: str | None) -> str:
    """``zone`` and ``language`` are in the key only: the render reads the active ones itself."""
    return get_template(template_name).render({"c": value, "csrf_token": CSRF_STAND_IN})


#: What ``{% csrf_token %}`` drew around the stand-in: with no token (a push, drawn without a request) Django's
#: tag draws nothing, and so does this.
_CSRF_INPUT = f'<input type="hidden" name="csrfmiddlewaretoken" value="{CSRF_STAND_IN}">'


def draw_kept(template_name: str, value, csrf_token: str = "") -> str:
    html = _drawn(template_name, value, timezone.get_current_timezone_name(), translation.get_language())
    if CSRF_STAND_IN not in html:
        return html
    if not csrf_token:
        html = html.replace(_CSRF_INPUT, "")
    return html.replace(CSRF_STAND_IN, csrf_token)


@register.simple_tag(takes_context=True)
def kept(context, template_name: str, value):
    token = context.get("csrf_token")
    token = "" if token in (None, "NOTPROVIDED") else str(token)
    return mark_safe(draw_kept(template_name, value, token))
