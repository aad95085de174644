"""The doors' batch intake: one request that makes several jobs (``jobs.queue.batches`` admits them together).

The page's batch mode turns its one form into members:

    lines    a prompt per line                       "a red car\\na blue car"          -> 2 jobs
    seeds    N jobs, seeds from the form's seed up   seed 7, 4 seeds                  -> seeds 7, 8, 9, 10
             (random seeds when the seed is empty)
    matrix   every combination of {a|b} parts        "a {red|blue} car at {dawn|night}" -> 4 jobs

and the REST API's ``POST /api/jobs/batch`` gives each member's body itself. Either way each member is checked as
a single submit is: one ``Submission`` each (``jobs.queue.submission``, on its device or on the pool), handed to
``batch_submit``: the batch adds no rule of its own besides its size (``MAX_BATCH``).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping
from typing import Any

from jobs.core.selectors import can_manage, jobs_visible_to
from jobs.doors.intake import show_refusal, stash_forget
from jobs.models import CANCELLABLE_STATES, Job
from jobs.queue.admission import RequestInvalid
from jobs.queue.batches import (
    MAX_BATCH,
    BatchInvalid,
    BatchPreview,
    batch_counts,
    batch_preview,
    batch_submit,
    too_big,
)
from jobs.queue.submission import Submission

#: The page's batch modes (``batch_mode``); "" is a single job.
MODES = {"": "One job", "lines": "A prompt per line", "seeds": "Several seeds", "matrix": "Prompt matrix"}
#: The fields that hold a kind's text (the first a form has is the one a batch varies).
PROMPT_FIELDS = ("prompt", "caption", "input")
SEED_MAX = 2**31 - 1
_PART = re.compile(r"\{([^{}]*)\}")


def _refuse(field: str, message: str) -> RequestInvalid:
    return RequestInvalid({field: [message]})


def _size_check(size: int, field: str) -> None:
    if why := too_big(size):
        raise _refuse(field, why)


def prompt_lines(text: str) -> list[str]:
    """A prompt per line: the non-empty lines, trimmed."""
    return [line.strip() for line in str(text).splitlines() if line.strip()]


def matrix_prompts(text: str) -> list[str]:
    """Every combination of the ``{a|b|c}`` parts, in order (the first part varies slowest); a text with none
    is itself. The count is known before anything is expanded: a matrix past ``MAX_BATCH`` is refused."""
    text = str(text)
    groups = [[option.strip() for option in m.group(1).split("|")] for m in _PART.finditer(text)]
    size = 1
    for options in groups:
        size *= len(options)
        _size_check(size, "prompt")  # stop multiplying as soon as it is too big
    pieces = _PART.split(text)[::2]  # the text between the parts
    out = []
    for choice in itertools.product(*groups):
        words = [pieces[0]]
        for option, after in zip(choice, pieces[1:], strict=True):
            words += [option, after]
        out.append(" ".join("".join(words).split()))
    return out


def batch_seeds(base: Any, count: int, *, rng: random.Random | None = None) -> list[int]:
    """``count`` seeds: from ``base`` up (wrapping past the largest seed), or random ones when ``base`` is empty."""
    _size_check(count, "batch_count")
    if base in (None, ""):
        rng = rng or random.SystemRandom()
        return rng.sample(range(SEED_MAX + 1), count)
    start = int(base)
    return [(start + i) % (SEED_MAX + 1) for i in range(count)]


def prompt_field(data: Mapping[str, Any]) -> str | None:
    return next((name for name in PROMPT_FIELDS if name in data), None)


def _count(raw: Any) -> int:
    try:
        count = int(str(raw).strip())
    except ValueError:
        raise _refuse("batch_count", "Give how many jobs: a whole number from 1 to 50.") from None
    _size_check(count, "batch_count")
    return count


def _parsed_seed(raw: Any) -> Any:
    text = str(raw if raw is not None else "").strip()
    if not text:
        return ""
    if not text.isdigit() or int(text) > SEED_MAX:
        raise _refuse("seed", f"Give a seed from 0 to {SEED_MAX}, or leave it empty for random seeds.")
    return int(text)


def members_of(data: Mapping[str, Any], mode: str, count: Any = None) -> list[dict[str, Any]]:
    """The page form's fields as each member's (``mode``: one of ``MODES``); ``RequestInvalid`` naming the field
    when the batch can't be made (no prompt lines, too many jobs, a count that is no number)."""
    if mode not in MODES:
        raise _refuse("batch_mode", f"Unknown batch mode; choose one of: {', '.join(m for m in MODES if m)}.")
    base = data.copy() if hasattr(data, "copy") else dict(data)
    if not mode:
        return [base]
    if mode == "seeds":
        seeds = batch_seeds(_parsed_seed(data.get("seed")), _count(count))
        return [_with(base, "seed", str(seed)) for seed in seeds]
    name = prompt_field(data)
    if name is None:
        raise _refuse("batch_mode", "This kind has no prompt to vary; choose “Several seeds”.")
    text = str(data.get(name) or "")
    prompts = prompt_lines(text) if mode == "lines" else matrix_prompts(text)
    if mode == "lines":
        _size_check(len(prompts), name)
    if not prompts or not any(prompts):
        raise _refuse(name, "Write at least one prompt.")
    return [_with(base, name, prompt) for prompt in prompts]


def _with(base: Any, name: str, value: str) -> Any:
    member = base.copy()
    member[name] = value
    return member


def page_checks(
    *, owner: Any, device: Any, kind: str, members: list[Any], files: Mapping[str, Any] | None, pool: bool
) -> list[Submission]:
    """Each member as the page's single submit is: a ``Submission`` on the pool ("any capable device") or on
    ``device``, all sharing the page's files."""
    return [Submission(owner, kind, data, files, device=None if pool else device) for data in members]


def member_label(index: int, data: Mapping[str, Any] | None) -> str:
    """ "Job 3 (“a blue car at dawn”)" """
    name = prompt_field(data or {})
    text = " ".join(str((data or {}).get(name) or "").split()) if name else ""
    if len(text) > 40:
        text = text[:40] + "…"
    return f"Job {index + 1}" + (f" (“{text}”)" if text else "")


def batch_refusal(exc: BatchInvalid, members: list[Any]) -> RequestInvalid:
    """The refused members as one refusal on the page's form: each on its field, named by number and prompt."""
    errors: dict[str, list[str]] = {}
    for index in sorted(exc.errors):
        label = member_label(index, members[index] if index < len(members) else None)
        for name, messages in exc.errors[index].errors.items():
            errors.setdefault(name, []).extend(f"{label}: {m}" for m in messages)
    return RequestInvalid(errors)


# -- the page ---------------------------------------------------------------------------------------------------

#: What the page's batch mode posts besides the kind's form.
PAGE_FIELDS = ("batch_mode", "batch_count")


def page_mode(data: Mapping[str, Any]) -> str:
    return str(data.get("batch_mode") or "")


def _page_members(request: Any) -> list[Any]:
    data = request.POST.copy()
    for name in PAGE_FIELDS:
        data.pop(name, None)
    return members_of(data, page_mode(request.POST), request.POST.get("batch_count"))


def first_member(request: Any) -> Any:
    """The page form's fields as its batch's first job (what the summary's single estimate is for), or the form's
    own fields when no batch can be made of them (the summary says why)."""
    try:
        return _page_members(request)[0]
    except RequestInvalid:
        return request.POST


def _page_checks(request: Any, form: Any, members: list[Any], *, pool: bool) -> list[Submission]:
    for data in members:
        data.setdefault("polite", "")  # an unticked checkbox is absent: off, not the API's default (on)
    files = dict(form.files.items()) if form is not None and form.files else {}
    return page_checks(owner=request.user, device=form.device, kind=form.kind, members=members, files=files,
                       pool=pool)  # fmt: skip


def page_batch_preview(request: Any, form: Any, *, pool: bool) -> tuple[BatchPreview | None, str]:
    """The summary's batch line: (what queuing it now would give, why it can't be made: "" when it can)."""
    try:
        members = _page_members(request)
    except (
        RequestInvalid
    ) as exc:  # the batch's own fields: their words say what is wrong, no "prompt:" prefix
        return None, " ".join(m for messages in exc.errors.values() for m in messages)
    preview = batch_preview(owner=request.user, members=_page_checks(request, form, members, pool=pool))
    if preview.errors:
        return preview, batch_refusal(BatchInvalid(preview.errors, preview.size), members).summary()
    return preview, ""


def submit_page_batch(request: Any, form: Any, token: str | None, *, pool: bool) -> list[Job] | None:
    """The page's batch try, all or nothing: its jobs, or None with every refused member's reason on the form."""
    try:
        members = _page_members(request)
        jobs = batch_submit(
            owner=request.user,
            members=_page_checks(request, form, members, pool=pool),
            idempotency_key=token,
        )
    except BatchInvalid as exc:
        show_refusal(form, batch_refusal(exc, members))
        return None
    except RequestInvalid as exc:
        show_refusal(form, exc)
        return None
    if not getattr(jobs[0], "idempotent_replay", False):
        stash_forget(user=request.user, token=token)
    return jobs


def batch_groups(user: Any, batch_ids: list[str]) -> list[dict[str, Any]]:
    """The batches as the queue page and the gallery show them: how far each is, its first job (what it is
    called), and whether ``user`` may cancel it (its owner or an admin: ``can_manage``)."""
    counts = batch_counts(batch_ids)
    firsts: dict[str, Job] = {}
    for job in jobs_visible_to(user).filter(batch__in=list(counts)).order_by("pk"):
        firsts.setdefault(job.batch, job)
    return [
        {
            "id": b,
            "counts": counts[b],
            "first": firsts[b],
            "may_cancel": counts[b].can_cancel and can_manage(user, firsts[b]),
        }
        for b in batch_ids
        if b in counts and b in firsts
    ]


def active_batches(user: Any, *, limit: int = 20) -> list[dict[str, Any]]:
    """The batches ``user`` may see that still have work waiting or running, newest first."""
    ids = (
        jobs_visible_to(user)
        .filter(state__in=CANCELLABLE_STATES)
        .exclude(batch="")
        .order_by("-created")
        .values_list("batch", flat=True)
    )
    seen = list(dict.fromkeys(ids[: limit * MAX_BATCH]))[:limit]
    return batch_groups(user, seen)


__all__ = [
    "active_batches",
    "batch_groups",
    "page_batch_preview",
    "submit_page_batch",
    "MAX_BATCH",
    "MODES",
    "batch_refusal",
    "batch_seeds",
    "first_member",
    "matrix_prompts",
    "member_label",
    "members_of",
    "page_checks",
    "prompt_lines",
]
