"""Template tags for the job page's inputs and live preview (read from the store: a stat or two, no device I/O)."""

from __future__ import annotations

from typing import Any

from django import template

from jobs.files.inputs import job_inputs
from jobs.files.previews import preview_box
from jobs.kinds.table import style_of

register = template.Library()


@register.simple_tag
def inputs_of(job: Any, public: bool = False) -> list:
    """``{% inputs_of job public as inputs %}``: on the share link's page, links go through its token (the
    page is only reachable with the job's current token, so ``job.share_token`` is the one in its URL)."""
    return job_inputs(job, share_token=job.share_token if public else "")


@register.simple_tag
def preview_of(job: Any) -> dict[str, Any]:
    """``{% preview_of job as preview %}``: whether the page polls for a preview, and the current one (the job's
    device streams previews when the kinds table gives its pair the "stream" style)."""
    return preview_box(job, style_of=style_of)
