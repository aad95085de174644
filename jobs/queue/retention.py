"""Retention: results that don't fill the disk. Admins set rules (``jobs.models.RetentionRule``) for the household
and per person (a person's rule replaces the household's for them): keep results ``keep_days`` days, and/or only the
newest ``keep_gb`` GB. Both given: whichever takes more.

What a rule would take is announced a week before (``NOTICE``): a ``RetentionNotice`` per result, due at the start
of the household day a week later, shown on the Retention page (the person's own; admins see everyone's) and told
to the owner through the hooks registered with :func:`register_announced` (``notify`` registers one at start-up;
jobs never imports notify). On its day the daily task (``jobs.tasks.apply_retention``, ``manage.py
apply_retention``) moves it to the trash (``jobs.queue.trash``), where it waits ``HUB_TRASH_DAYS`` more days. A
result the rule no longer takes by then (bookmarked, the rule changed, newer results deleted) keeps its place and
its notice goes.

Never taken: results bookmarked by anyone (``Bookmark``), and those something else keeps: each function registered
with :func:`register_kept` is asked, and album items (``jobs.core.albums.in_albums``); jobs not finished, jobs already
hidden or in the trash.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from jobs.core import albums
from jobs.models import FINAL_STATES, Bookmark, Job, RetentionNotice, RetentionRule
from jobs.queue import trash
from jobs.quotas.services import day_start

logger = logging.getLogger("jobs.queue.retention")

NOTICE = dt.timedelta(days=7)
GB = 1024**3
MAX_DAYS = 36500
MAX_GB = 1_000_000.0

# -- hooks -------------------------------------------------------------------------------------------------------
#: (job ids) -> the ids among them something else keeps. Registered at start-up.
KeptBy = Callable[[set[int]], Iterable[int]]
#: (owner id, job ids newly announced, when they go) -> None: tell the owner. Registered at start-up (notify).
Announced = Callable[[int, list[int], dt.datetime], None]
_kept_by: list[KeptBy] = []
_announced: list[Announced] = []


def register_kept(fn: KeptBy) -> None:
    """Another part of the hub keeps some results from retention (a layer above jobs)."""
    if fn not in _kept_by:
        _kept_by.append(fn)


def register_announced(fn: Announced) -> None:
    if fn not in _announced:
        _announced.append(fn)


def kept_by_others(job_ids: set[int]) -> set[int]:
    """The results retention must leave alone: bookmarked by anyone, in an album, or kept by a registered hook."""
    if not job_ids:
        return set()
    kept = set(Bookmark.objects.filter(job_id__in=job_ids).values_list("job_id", flat=True))
    kept |= albums.in_albums(job_ids)
    for fn in _kept_by:
        kept |= set(fn(job_ids)) & job_ids
    return kept


# -- rules -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    keep_days: int | None
    keep_gb: float | None
    own: bool  # the person's own rule (else the household's)

    def describe(self) -> str:
        parts = []
        if self.keep_days is not None:
            parts.append(f"results are kept {self.keep_days} day{'s' if self.keep_days != 1 else ''}")
        if self.keep_gb is not None:
            parts.append(f"only the newest {self.keep_gb:g} GB are kept")
        return " and ".join(parts)


def _rule_of(row: RetentionRule | None, *, own: bool) -> Rule | None:
    if row is None or (row.keep_days is None and row.keep_gb is None):
        return None
    return Rule(keep_days=row.keep_days, keep_gb=row.keep_gb, own=own)


def household_rule() -> Rule | None:
    return _rule_of(RetentionRule.objects.filter(user__isnull=True).first(), own=False)


def rule_for(user: Any) -> Rule | None:
    """The rule in force for ``user``: their own, else the household's; None: everything is kept."""
    own = RetentionRule.objects.filter(user_id=getattr(user, "pk", user)).first()
    if own is not None:
        return _rule_of(own, own=True)
    return household_rule()


def parse_rule(days: Any, gb: Any) -> tuple[int | None, float | None]:
    """What an admin typed: whole days ≥ 1 and GB > 0, each optional. ``ValidationError`` naming the field."""
    out_days: int | None = None
    out_gb: float | None = None
    text = str(days if days is not None else "").strip()
    if text:
        if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_DAYS:
            raise ValidationError(
                {"keep_days": f"Days: a whole number from 1 to {MAX_DAYS} (not {text[:20]!r})."}
            )
        out_days = int(text)
    text = str(gb if gb is not None else "").strip().replace(",", ".")
    if text:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 < value <= MAX_GB:
            raise ValidationError({"keep_gb": f"GB: a number above 0, e.g. 50 or 0.5 (not {text[:20]!r})."})
        out_gb = value
    return out_days, out_gb


def rule_set(
    *, by: Any | None, user: Any | None, keep_days: int | None, keep_gb: float | None
) -> Rule | None:
    """Set the household's rule (``user`` None) or a person's; both values None removes it (a person then follows
    the household's). Admins only (``by`` None: the command line). The next daily run announces what it takes."""
    if by is not None and not getattr(by, "is_admin", False):
        raise PermissionDenied("Only admins can set retention rules.")
    if keep_days is not None and (isinstance(keep_days, bool) or not 1 <= keep_days <= MAX_DAYS):
        raise ValidationError({"keep_days": f"Days: a whole number from 1 to {MAX_DAYS}."})
    if keep_gb is not None and not 0 < keep_gb <= MAX_GB:
        raise ValidationError({"keep_gb": "GB: a number above 0."})
    uid = getattr(user, "pk", user)
    with transaction.atomic():
        if keep_days is None and keep_gb is None:
            RetentionRule.objects.filter(user_id=uid).delete()
        else:
            RetentionRule.objects.update_or_create(
                user_id=uid, defaults={"keep_days": keep_days, "keep_gb": keep_gb}
            )
    logger.info(
        "retention of %s set by %s: days=%s gb=%s",
        getattr(user, "username", "the household"),
        getattr(by, "username", "the command line"),
        keep_days,
        keep_gb,
    )
    return rule_for(user) if user is not None else household_rule()


# -- what a rule takes -------------------------------------------------------------------------------------------
def taken(user: Any, rule: Rule, *, at: dt.datetime) -> dict[int, str]:
    """{job id: why} of ``user``'s results that ``rule`` takes at the moment ``at``: finished, listed (not hidden,
    not in the trash), holding files, not kept by anyone (:func:`kept_by_others`)."""
    uid = getattr(user, "pk", user)
    rows = list(
        Job.objects.filter(
            owner_id=uid, state__in=FINAL_STATES, hidden_at__isnull=True, trashed_at__isnull=True
        )
        .filter(artifacts__isnull=False)
        .annotate(size=Sum("artifacts__bytes"))
        .order_by("-created", "-pk")
        .values_list("pk", "created", "finished_at", "size")
    )
    kept = kept_by_others({pk for pk, *_ in rows})
    out: dict[int, str] = {}
    if rule.keep_days is not None:
        limit = at - dt.timedelta(days=rule.keep_days)
        for pk, created, finished, _size in rows:
            if pk not in kept and (finished or created) <= limit:
                out[pk] = f"older than {rule.keep_days} day{'s' if rule.keep_days != 1 else ''}"
    if rule.keep_gb is not None:
        total, room = 0, rule.keep_gb * GB
        for pk, _created, _finished, size in rows:  # newest first; kept results don't use the room
            if pk in kept:
                continue
            total += size or 0
            if total > room:
                out.setdefault(pk, f"beyond the newest {rule.keep_gb:g} GB")
    return out


@dataclass
class Outcome:
    """One daily run (or its dry run), per person: what it announced, moved to the trash and forgot."""

    announced: dict[int, list[int]] = field(default_factory=dict)  # owner id -> job ids
    trashed: dict[int, list[int]] = field(default_factory=dict)
    dropped: list[int] = field(default_factory=list)  # notices of results no longer taken
    due_at: dt.datetime | None = None  # when the newly announced ones go

    @property
    def counts(self) -> tuple[int, int]:
        return sum(map(len, self.announced.values())), sum(map(len, self.trashed.values()))


def due_for(now: dt.datetime) -> dt.datetime:
    """When what is announced now goes: the start of the household day a week from now (the daily run of that
    day takes it, whatever its hour)."""
    return day_start(now + NOTICE)


def retention_apply(*, now: dt.datetime | None = None, dry_run: bool = False) -> Outcome:
    """The daily run: for each active person with a rule, move the results announced for today to the trash,
    forget notices of results no longer taken, announce what the rule will take a week from now. ``dry_run``: say
    what it would do, change nothing."""
    now = now or timezone.now()
    out = Outcome(due_at=due_for(now))
    for person in get_user_model().objects.filter(is_active=True).order_by("pk"):
        rule = rule_for(person)
        notices = {n.job_id: n for n in RetentionNotice.objects.filter(owner_id=person.pk)}
        if rule is None:
            out.dropped += list(notices)
            if not dry_run:
                RetentionNotice.objects.filter(owner_id=person.pk).delete()
            continue
        _apply_one(person, rule, notices, now=now, dry_run=dry_run, out=out)
    if not dry_run:
        _tell_on_commit(out)
    return out


def _apply_one(
    person: Any,
    rule: Rule,
    notices: dict[int, RetentionNotice],
    *,
    now: dt.datetime,
    dry_run: bool,
    out: Outcome,
) -> None:
    today = taken(person, rule, at=now)
    ahead = taken(person, rule, at=out.due_at or now)
    for job_id, notice in notices.items():
        if notice.due_at <= now and job_id in today:
            out.trashed.setdefault(person.pk, []).append(job_id)
            if not dry_run:
                _to_trash(notice, rule)
        elif job_id not in ahead:
            out.dropped.append(job_id)
            if not dry_run:
                notice.delete()
    new = sorted(set(ahead) - set(notices), reverse=True)
    if dry_run:
        # A dry run shows what today's run takes even without a notice: what it would announce for a week on.
        out.announced[person.pk] = new
        return
    if new:
        RetentionNotice.objects.bulk_create(
            [
                RetentionNotice(
                    job_id=pk, owner_id=person.pk, announced_at=now, due_at=out.due_at, reason=ahead[pk]
                )
                for pk in new
            ],
            ignore_conflicts=True,
        )
        out.announced[person.pk] = new


def _to_trash(notice: RetentionNotice, rule: Rule) -> None:
    job = Job.objects.filter(pk=notice.job_id).first()
    notice.delete()
    if job is None:
        return
    try:
        trash.trash_move(job=job, by=None, force=True, why=f" (retention: {notice.reason})")
    except ValidationError:  # running again (a retry): its turn comes at a later run
        logger.info("retention: job %s is running, left for now", job.pk)


def _tell_on_commit(out: Outcome) -> None:
    def tell() -> None:
        for owner_id, ids in out.announced.items():
            if not ids or out.due_at is None:
                continue
            for fn in _announced:
                try:
                    fn(owner_id, ids, out.due_at)
                except Exception:  # a notification never undoes or stops the run
                    logger.exception("retention: telling person %s failed", owner_id)

    transaction.on_commit(tell)


# -- selectors for the pages -------------------------------------------------------------------------------------
def notices_of(user: Any | None) -> Any:
    """The results announced to go, soonest first: ``user``'s, or everyone's (None, admins)."""
    qs = RetentionNotice.objects.select_related("job", "owner", "job__device").order_by(
        "due_at", "owner_id", "-job_id"
    )
    if user is not None:
        qs = qs.filter(owner_id=getattr(user, "pk", user))
    return qs.filter(Q(job__trashed_at__isnull=True))


def rules() -> list[RetentionRule]:
    """Every rule: the household's first, then people's by name (admins' page)."""
    rows = RetentionRule.objects.select_related("user")
    return sorted(rows, key=lambda r: (r.user is not None, r.user.username if r.user else ""))


__all__ = [
    "NOTICE",
    "Outcome",
    "Rule",
    "due_for",
    "household_rule",
    "kept_by_others",
    "notices_of",
    "parse_rule",
    "register_announced",
    "register_kept",
    "retention_apply",
    "rule_for",
    "rule_set",
    "rules",
    "taken",
]
