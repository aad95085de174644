"""Small forms for the job pages (filters, cancel reason, queue moves) and the gallery's cursor pagination.

The gallery pages by (created, id), never OFFSET: a page is "the next N older than this job", so new jobs
arriving meanwhile don't shift or repeat cards, and page 500 costs what page 1 does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.urls import reverse

from devices.models import Device
from hub.cursors import decode_cursor, encode_cursor
from hub.parsing import parse_id
from hub.widgets import LongSelect
from jobs.core.bookmarks import bookmarked_ids
from jobs.core.selectors import jobs_visible_to
from jobs.files.thumbnails import THUMB_SIZE
from jobs.live.fragments import job_title
from jobs.models import ACTIVE_STATES, PENDING_STATES, Artifact, Job, JobKind, JobState

PAGE_SIZE = 24
STATE_GROUPS = {
    "waiting": list(PENDING_STATES),
    "running": list(ACTIVE_STATES),
    "done": [JobState.DONE],
    "failed": [JobState.FAILED, JobState.INTERRUPTED],
    "cancelled": [JobState.CANCELLED],
}


MAX_SEARCH_WORDS = 8  # each word is one more LIKE over every visible prompt; a pasted paragraph must not be


def search_words(query: str) -> list[str]:
    """The words a gallery search must all find, in any order: "kite sunset" finds "sunset over a kite".

    Split on whitespace, empty words dropped, repeats (ignoring case) once, at most ``MAX_SEARCH_WORDS``.
    """
    words: list[str] = []
    for word in query.split():
        if word.casefold() not in (w.casefold() for w in words):
            words.append(word)
    return words[:MAX_SEARCH_WORDS]


def prompt_search(qs, query: str):
    """``qs`` narrowed to the jobs whose prompt holds every word of ``query`` (``search_words``), ignoring case.

    The one search rule: the gallery's form and the API's ``q`` both use it. An AND of LIKEs on one column is
    still one query; on PostgreSQL each LIKE is served by ``jobs_prompt_trgm_idx`` (migration 0007).
    """
    for word in search_words(query):
        qs = qs.filter(prompt__icontains=word)
    return qs


class CancelForm(forms.Form):
    reason = forms.CharField(required=False, max_length=300, label="Reason")

    def clean_reason(self) -> str:
        return (self.cleaned_data.get("reason") or "").strip()


class DirectionForm(forms.Form):
    direction = forms.ChoiceField(choices=[("up", "Up"), ("down", "Down")])


def people_with_jobs(user: Any) -> list[Any]:
    """The people ``user`` sees at least one job of (the gallery's person filter), by username.

    One EXISTS per person on the owner's own index (``jobs_owner_hist_idx``) instead of the list of owners of
    every visible job: that subquery read all of them (21 ms at 100k jobs for a list of 5 names).
    """
    if not getattr(user, "is_authenticated", False):
        return []
    jobs = Job.objects.filter(owner=OuterRef("pk"), hidden_at__isnull=True).order_by()
    if user.is_admin:
        seen = Exists(jobs)
    else:  # the rule of ``jobs_visible_to``: their own, and shared ones
        seen = Exists(jobs.filter(shared=True)) | (Q(pk=user.pk) & Exists(jobs))
    return list(get_user_model().objects.filter(seen).order_by("username"))


class GalleryFilterForm(forms.Form):
    q = forms.CharField(
        required=False,
        max_length=200,
        label="Search prompts",
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "e.g. lighthouse"}),
    )
    # The selects are drawn without a template per option (``LongSelect``: the same HTML as Django's Select); the
    # four took 2.5 ms of a gallery page's ~27 ms of CPU, re-sent with every filter change.
    kind = forms.ChoiceField(
        required=False, label="Kind", choices=[("", "Any kind"), *JobKind.choices], widget=LongSelect
    )
    state = forms.ChoiceField(
        required=False,
        label="State",
        widget=LongSelect,
        choices=[
            ("", "Any state"),
            ("waiting", "Waiting"),
            ("running", "Running"),
            ("done", "Done"),
            ("failed", "Failed"),
            ("cancelled", "Cancelled"),
        ],
    )
    person = forms.ChoiceField(required=False, label="Person", widget=LongSelect)
    device = forms.ChoiceField(required=False, label="Device", widget=LongSelect)
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    bookmarked = forms.BooleanField(required=False, label="Bookmarked only")
    # One batch's jobs (``Job.batch``): the gallery's group, reached from a card's "batch" link.
    batch = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput)

    def __init__(self, data: Any = None, *, user: Any) -> None:
        super().__init__(data, label_suffix="")
        self.user = user
        self.fields["person"].choices = [("", "Anyone")] + [
            (p.username, str(p)) for p in people_with_jobs(user)
        ]
        self.fields["device"].choices = [("", "Any device")] + [
            (str(pk), name) for pk, name in Device.objects.order_by("name").values_list("pk", "name")
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "“To” is before “From”.")
        return data

    def apply(self, qs):
        if not self.is_valid():
            return qs
        d = self.cleaned_data
        qs = prompt_search(qs, d.get("q") or "")
        if d.get("kind"):
            qs = qs.filter(kind=d["kind"])
        if d.get("state"):
            qs = qs.filter(state__in=STATE_GROUPS[d["state"]])
        if d.get("person"):
            qs = qs.filter(owner__username=d["person"])
        if d.get("device"):
            qs = qs.filter(device_id=parse_id(d["device"]))  # one of the form's choices: a device's pk
        if d.get("since"):
            qs = qs.filter(created__date__gte=d["since"])
        if d.get("until"):
            qs = qs.filter(created__date__lte=d["until"])
        if d.get("bookmarked"):
            qs = qs.filter(bookmarks__user=self.user)
        if d.get("batch"):
            qs = qs.filter(batch=d["batch"])
        return qs

    @property
    def active(self) -> bool:
        return self.is_valid() and any(self.cleaned_data.get(k) for k in self.fields)


#: How many ids one selection may name (a page of cards is 24; "Show older" adds more).
MAX_SELECTED = 1000


class SelectionInvalid(ValueError):
    """A selection or filter the download can't use; the message says why (a 400, or a note on the gallery)."""


def selected_ids(values: list[str]) -> list[int]:
    """The job ids of ``ids`` (repeated, or comma-separated), in order, each once. Raises ``SelectionInvalid``."""
    ids: list[int] = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            pk = parse_id(part.strip())
            if pk is None:
                raise SelectionInvalid(f"“{part.strip()[:20]}” is not a job number.")
            if pk not in ids:
                ids.append(pk)
    if len(ids) > MAX_SELECTED:
        raise SelectionInvalid(f"Select at most {MAX_SELECTED} jobs at once.")
    return ids


def jobs_to_download(user: Any, data: Any) -> QuerySet[Job]:
    """The jobs a zip download of ``data`` holds, newest first: those ``user`` may see (``jobs_visible_to``) that
    the gallery's filters in ``data`` match and, when ``data`` is a selection (``ids``, or the gallery's
    ``selection`` marker), only the jobs it names; a selection naming none is refused. An id of a job the person
    can't see (someone else's private job, one deleted since) is left out, as if it were not there.
    Raises ``SelectionInvalid`` for filters the gallery form refuses or a malformed id."""
    form = GalleryFilterForm(data, user=user)
    if not form.is_valid():
        problems = "; ".join(
            f"{form.fields[k].label if k in form.fields else k}: {' '.join(v)}"
            for k, v in form.errors.items()
        )
        raise SelectionInvalid(f"These filters can't be used: {problems}")
    qs = form.apply(jobs_visible_to(user))
    if "ids" in data or data.get(
        "selection"
    ):  # a selection: only what it names, and nothing named is an error
        raw = data.getlist("ids") if hasattr(data, "getlist") else [str(data.get("ids") or "")]
        ids = selected_ids(raw)
        if not ids:
            raise SelectionInvalid("Nothing selected: tick the jobs to download first.")
        qs = qs.filter(pk__in=ids)
    return qs.order_by("-created", "-id")


@dataclass(frozen=True)
class GalleryCard:
    """Everything a gallery card shows (``jobs/_fragments.html#job-card``), and nothing else: it is the key the
    card's drawing is kept under (``{% kept %}``), so a card is drawn again exactly when one of these changes."""

    pk: int
    state: str
    state_label: str
    kind: str
    kind_label: str
    is_final: bool
    owner_id: int
    owner: str
    created: dt.datetime
    shared: bool
    title: str
    thumb_url: str = ""
    thumb_width: int = 0
    thumb_height: int = 0
    bookmarked: bool = False
    batch: str = ""
    #: what the result can become next for the viewer, (label, url) each (jobs.doors.result_actions.with_actions)
    actions: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, job: Job, *, thumb_url: str = "", bookmarked: bool = False) -> GalleryCard:
        w, h = THUMB_SIZE if thumb_url else (0, 0)
        return cls(
            pk=job.pk,
            state=job.state,
            state_label=job.get_state_display(),
            kind=job.kind,
            kind_label=job.get_kind_display(),
            is_final=job.is_final,
            owner_id=job.owner_id,
            owner=str(job.owner),
            created=job.created,
            shared=job.shared,
            title=job_title(job, limit=90),
            thumb_url=thumb_url,
            thumb_width=w,
            thumb_height=h,
            bookmarked=bookmarked,
            batch=job.batch,
        )


@dataclass
class GalleryPage:
    cards: list[GalleryCard]
    next_url: str = ""
    is_first: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def gallery_page(user: Any, form: GalleryFilterForm, *, cursor: str = "") -> GalleryPage:
    """One page of cards, newest first: 4 queries whatever the page (jobs, thumbnails, bookmarks, +filters)."""
    qs = form.apply(jobs_visible_to(user)).order_by("-created", "-id")
    position = decode_cursor(cursor) if cursor else None
    if position:
        created, pk = position
        qs = qs.filter(Q(created__lt=created) | Q(created=created, pk__lt=pk))
    thumbs = Artifact.objects.filter(kind=Artifact.Kind.THUMB).order_by("id")  # made by jobs.files.thumbnails
    jobs = list(
        qs.prefetch_related(Prefetch("artifacts", queryset=thumbs, to_attr="thumbs"))[: PAGE_SIZE + 1]
    )
    more = len(jobs) > PAGE_SIZE
    jobs = jobs[:PAGE_SIZE]
    marks = bookmarked_ids(user, [j.pk for j in jobs]) if jobs else set()
    cards = [
        GalleryCard.of(
            job,
            thumb_url=reverse("jobs-file", args=[job.pk, job.thumbs[0].pk])
            if job.state == JobState.DONE and job.thumbs
            else "",
            bookmarked=job.pk in marks,
        )
        for job in jobs
    ]
    next_url = ""
    if more:
        params = form.data.copy() if hasattr(form.data, "copy") else {}
        if hasattr(params, "setlist"):
            params["cursor"] = encode_cursor(jobs[-1])
            next_url = "?" + params.urlencode()
    return GalleryPage(cards=cards, next_url=next_url, is_first=position is None)
