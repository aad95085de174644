"""On a phone the job page is one column ordered by CSS (static/css/hub.css): every card of the page needs its
place there, or it gets order 0 and jumps above the status, away from where Tab reaches it."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def test_every_card_of_the_job_page_has_its_place_on_a_phone():
    css = (ROOT / "static/css/hub.css").read_text()
    phone = css[css.index("/* the job page */") :]
    phone = phone[phone.index("@media (max-width: 52rem)") :]
    phone = phone[: phone.index("\n}\n")]
    placed = set(re.findall(r"\.(job-[a-z]+)(?=[^{]*\{\s*order:)", phone))
    pages = [ROOT / "templates/jobs/detail.html", ROOT / "templates/notify/_job_deliveries.html"]
    cards = {c for p in pages for c in re.findall(r'class="card (job-[a-z]+)', p.read_text())}
    assert cards and not cards - placed, sorted(cards - placed)
