"""Job pages: new job, job page, gallery, queue control, downloads and the public share view.

Each view: an access-checking selector first, a Form, one service call, then render or redirect. The same
template partials serve the full page, the htmx swap and the websocket push (``jobs.live.fragments``).
"""

from __future__ import annotations

import datetime as dt

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST, require_safe

from devices.models import Device
from devices.selectors import device_get_for
from hub.accounts.decorators import admin_required, member_required
from hub.pagecache import kept_page
from hub.parsing import parse_id, parse_int
from hub.ratelimit import preview_allowed, rate_key
from jobs.core import share_links
from jobs.core.bookmarks import bookmark_toggle, is_bookmarked
from jobs.core.links import FIELD_MEDIA
from jobs.core.selectors import PagePlan, can_manage, job_by_share_token, job_for, jobs_visible_to
from jobs.doors.album_views import with_album_action
from jobs.doors.batch import (
    active_batches,
    batch_groups,
    first_member,
    page_batch_preview,
    page_mode,
    submit_page_batch,
)
from jobs.doors.filters import CancelForm, DirectionForm, GalleryFilterForm, gallery_page
from jobs.doors.intake import (
    PageRequest,
    again_submission,
    already_queued,
    form_for,
    keep_uploads,
    page_form,
    page_request,
    pool_devices,
    show_refusal,
    submit,
    submit_page_form,
    submit_token_of,
    typed_form,
)
from jobs.doors.pages import (
    admission_for,
    again_form,
    dashboard_context,
    detail_context,
    job_spark,
    new_job_context,
    pool_admission,
    preset_initial,
    refusal_for,
    story_form,
    story_kind,
    swapped_fields_form,
)
from jobs.doors.result_actions import (
    FromResult,
    actions_for,
    chain_preview,
    from_initial,
    mark_from,
    refs_in,
    submit_page_chain,
    summary_form,
    thens_for,
    ticked,
    wants_chain,
    with_actions,
)
from jobs.doors.share_pages import link_refusal, password_given
from jobs.files.downloads import artifact_response
from jobs.files.inputs import input_response, preview_response
from jobs.files.previews import preview_box
from jobs.files.story import read_story
from jobs.kinds.table import style_of
from jobs.live.fragments import job_context, job_with_related, queue_context, sparkline
from jobs.models import JobKind
from jobs.queue import batches, services
from jobs.queue.admission import Admission, RequestInvalid
from jobs.queue.batches import batch_counts

DETAIL = "jobs/detail.html"
PARTS = "jobs/_fragments.html"


def _back(request: HttpRequest, default: str) -> str:
    """Where to go after a POST: ``next`` if it is a path of ours, else ``default`` (no open redirects; and never a
    bare word, which ``redirect`` would take for a URL name)."""
    target = request.POST.get("next") or ""
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default


def _managed_job(request: HttpRequest, job_id: int):
    """The job if the person may change it; 404 if they may not even see it, 403 if they may only look."""
    job = job_for(request.user, job_id)
    if not can_manage(request.user, job):
        raise PermissionDenied("only the owner or an admin can change this job")
    return job


def _service_error(request: HttpRequest, exc: ValidationError) -> None:
    messages.error(request, " ".join(exc.messages))


# -- new job: door → intake (``jobs.doors.intake``) → admission → services, then the page builder draws ------------
def _already_queued(request: HttpRequest, job) -> HttpResponse:
    """A second POST of the same form (double click, a retried request): nothing new, the job it queued."""
    messages.info(request, "This form was already sent; here is the job it queued.")
    return redirect("jobs-detail", job_id=job.pk)


def _new_page(
    request: HttpRequest,
    taken: PageRequest,
    form,
    *,
    status: int = 200,
    refs: dict[str, FromResult] | None = None,
    thens: list | None = None,
) -> HttpResponse:
    ctx = new_job_context(request, taken.device, taken.kind, form=form, pool=taken.pool)
    mark_from(form, refs or {})  # a file input filled from a result shows it (jobs.doors.result_actions)
    ctx["from_results"], ctx["thens"] = refs or {}, thens or []
    if request.method == "POST":  # a refused try keeps what was ticked and typed for the next steps
        ctx["then_checked"] = [t.name for t in ticked(request.POST, ctx["thens"])]
        ctx["then_values"] = request.POST
    return render(request, "jobs/new.html", ctx, status=status)


@require_http_methods(["GET", "POST"])
def job_new(request: HttpRequest) -> HttpResponse:
    taken = page_request(request)
    if taken.problem:
        messages.error(request, taken.problem)
    if taken.device is None or not request.user.can_submit:  # the page explains why; no form to fill in vain
        refused = request.method == "POST" and not request.user.can_submit
        return _new_page(request, taken, None, status=403 if refused else 400 if taken.problem else 200)
    if taken.problem:  # an unknown device or kind: queue nothing, offer the valid choices, keep the typing
        return _new_page(request, taken, typed_form(request, taken), status=400)
    if queued := already_queued(request.user, taken.token):
        return _already_queued(request, queued)
    refs = refs_in(request, FIELD_MEDIA)  # another job's result as an input: 404 for one the person can't see
    initial = {**preset_initial(request, taken.kind), **from_initial(request, taken.kind, refs)}
    form = page_form(request, taken, initial=initial)
    thens = thens_for(request.user, taken.kind)
    if request.method != "POST":
        return _new_page(request, taken, form, refs=refs, thens=thens)
    if page_mode(request.POST) or wants_chain(request, form, thens):
        return _batch_or_chain(request, taken, form, refs, thens)
    job = submit_page_form(request, form, taken.token, pool=bool(taken.pool))
    if job is None:
        keep_uploads(request, form)  # a refused try keeps its uploads: the next one may send none
        return _new_page(request, taken, form, status=400)
    if getattr(job, "idempotent_replay", False):  # the same form won a race against itself
        return _already_queued(request, job)
    messages.success(request, "Queued. This page follows it live; you can close it any time.")
    return redirect("jobs-detail", job_id=job.pk)


def _batch_or_chain(request: HttpRequest, taken: PageRequest, form, refs, thens) -> HttpResponse:
    """The page's batch mode, or a job taking another job's result or with "then" steps (not both, yet)."""
    if not page_mode(request.POST):
        return _chain_submitted(request, taken, form, refs, thens)
    if wants_chain(request, form, thens):
        form.add_error(
            None, "A batch can't take another job's result or queue “then” steps yet: queue one job."
        )
        return _new_page(request, taken, form, status=400, refs=refs, thens=thens)
    return _batch_submitted(request, taken, form)


def _chain_submitted(request: HttpRequest, taken: PageRequest, form, refs, thens) -> HttpResponse:
    """A job that takes another job's result, and the "then" steps ticked: queued in one go, or none."""
    if queued := already_queued(request.user, f"{taken.token}#0" if taken.token else None):
        return _already_queued(request, queued)
    chain = submit_page_chain(request, form, refs, thens, taken.token, pool=bool(taken.pool))
    if chain is None:
        keep_uploads(request, form)
        return _new_page(request, taken, form, status=400, refs=refs, thens=thens)
    first = chain.jobs[0]
    if len(chain.jobs) > 1 and chain.ready_at:
        last = timezone.localtime(chain.ready_at)
        messages.success(
            request,
            f"Queued {len(chain.jobs)} jobs, one after the other; the last is expected ≈ {last:%H:%M}.",
        )
    else:
        messages.success(request, "Queued. This page follows it live; you can close it any time.")
    return redirect("jobs-detail", job_id=first.pk)


def _batch_submitted(request: HttpRequest, taken: PageRequest, form) -> HttpResponse:
    """The page's batch mode: every job of the batch queued, or none (each refused job named on the form)."""
    jobs = submit_page_batch(request, form, taken.token, pool=bool(taken.pool))
    if jobs is None:
        keep_uploads(request, form)
        return _new_page(request, taken, form, status=400)
    if getattr(jobs[0], "idempotent_replay", False):
        messages.info(request, "This form was already sent; here is the batch it queued.")
    else:
        ready = [j.admission.ready_at for j in jobs if getattr(j, "admission", None) and j.admission.ready_at]
        last = f"; the last is expected ≈ {timezone.localtime(max(ready)):%H:%M}" if ready else ""
        messages.success(request, f"Queued a batch of {len(jobs)} jobs{last}.")
    return redirect(f"{reverse('jobs-gallery')}?batch={jobs[0].batch}")


def _asked_too_often(request: HttpRequest, wait: int) -> HttpResponse:
    """The summary only, saying when it comes back (the page asks again then: hub.js); the button is left as it
    was, since nothing about the job was decided."""
    response = render(request, "jobs/new.html#admission", {"asked_too_often": wait}, status=429)
    response["Retry-After"] = str(wait)
    return response


def _summary_form(request: HttpRequest, taken: PageRequest):
    """The form the summary judges: in batch mode, the batch's first job (a prompt per line is judged line by line,
    not as one prompt)."""
    return form_for(
        owner=request.user,
        device=taken.device,
        kind=taken.kind,
        data=first_member(request) if page_mode(request.POST) else request.POST,
        files=request.FILES or None,
    )


def _batch_summary(request: HttpRequest, taken: PageRequest, form, ctx: dict) -> None:
    """In batch mode, once the first job can be judged: how many jobs, when the last is ready, or which is refused."""
    if page_mode(request.POST) and not ctx["refusal"] and ctx["admission"] is not None:
        ctx["batch"], ctx["refusal"] = page_batch_preview(request, form, pool=bool(taken.pool))


@member_required
@require_POST
def job_admission(request: HttpRequest) -> HttpResponse:
    """The summary under the form ("≈ 12 min · starts ≈ 02:40 · ready ≈ 02:52"), re-rendered on every change;
    for "any capable device", where it would start first and which devices can do it (``pool_admission``).

    When the model changed, the fields that depend on it (sizes, steps, voices) come along out-of-band.
    """
    if wait := preview_allowed(rate_key(request)):
        return _asked_too_often(request, wait)
    taken = page_request(request)
    if taken.device is None:
        return HttpResponse(status=204)
    if taken.problem:
        refusal = Admission(0.0, None, None, refused=taken.problem, refused_field="kind")
        ctx = {"admission": refusal, "fields_oob": False, "refusal": taken.problem}
        return render(request, "jobs/new.html#admission-response", ctx, status=400)
    refs = refs_in(request, FIELD_MEDIA)
    form = summary_form(request, _summary_form(request, taken), refs)
    # The fields shown were rendered for the model in ``fields_for``: another model chosen means other fields
    # (Foundation-1's prompt vs SongGeneration's caption and lyrics, a voice list vs a voice to clone, sizes and
    # steps), sent out-of-band. htmx names the form, not the select, as the trigger, hence the hidden field.
    posted_for = request.POST.get("fields_for")
    model = form.chosen_model()
    fields_oob = (posted_for is not None and posted_for != model) or bool(
        request.htmx and request.htmx.trigger_name == "model"
    )
    if fields_oob:
        keep_uploads(request, form)  # the swap empties the file inputs: the chosen files stay on the server
    ctx = new_job_context(request, taken.device, taken.kind, form=form, pool=taken.pool)
    if taken.pool:
        ctx["admission"], ctx["where"] = pool_admission(request, taken.pool, form, ctx["skip"])
    else:
        ctx["admission"] = admission_for(form)
    # Another device of the pool can do what the shown device's form refuses: nothing stands in the way.
    ctx["refusal"] = "" if ctx.get("where") else refusal_for(form, ctx["admission"], ctx["skip"])
    _batch_summary(request, taken, form, ctx)
    if not ctx["refusal"]:  # the "then" steps (jobs.doors.result_actions): when the last is expected
        ctx["chain"] = chain_preview(
            request.user, ctx["admission"], request.POST, thens_for(request.user, taken.kind)
        )
    ctx["fields_oob"] = fields_oob
    if fields_oob:
        ctx["form"] = swapped_fields_form(form)
        mark_from(ctx["form"], refs)
    ctx["again_flag"] = bool(request.POST.get("again"))
    return render(request, "jobs/new.html#admission-response", ctx)


@member_required
@require_POST
def job_from_file(request: HttpRequest) -> HttpResponse:
    """The new-job form filled in from a file the hub made (a PNG dropped onto the form, or chosen): its kind,
    model and settings. Only the posted file is read (``jobs.files.story.read_story``); the page comes back whole,
    for a plain POST, and htmx swaps the form part of it."""
    upload = request.FILES.get("settings_file")
    told = read_story(upload) if upload is not None else None
    taken = page_request(request, kind=story_kind(told))
    if taken.device is None or not request.user.can_submit:
        return _new_page(request, taken, None, status=400)
    if taken.problem:  # a kind the chosen device (or any) can't run: the shown kind's form takes what fits
        taken = page_request(request)
    name = (getattr(upload, "name", "") or "the file")[:80]
    form, note = story_form(request, taken.device, taken.kind, told, name)
    ctx = new_job_context(request, taken.device, taken.kind, form=form, pool=taken.pool)
    ctx["from_file"] = {"note": note, "filled": told is not None}
    return render(request, "jobs/new.html", ctx, status=200 if told is not None else 400)


@member_required
@require_http_methods(["GET", "POST"])
def job_again(request: HttpRequest, job_id: int) -> HttpResponse:
    """Run again with changes: the same form, filled in with the job's settings, admitted once."""
    job = job_for(request.user, job_id)
    token = submit_token_of(request)
    if queued := already_queued(request.user, token):
        return _already_queued(request, queued)
    form = again_form(request, job)
    # A pool job's run again is for the pool again (each device's form checks it); a pinned one's, its device.
    if request.method == "POST" and form.is_bound:
        try:
            new = submit(again_submission(request, job, token))
        except RequestInvalid as exc:
            show_refusal(form, exc)
        else:
            if getattr(new, "idempotent_replay", False):
                return _already_queued(request, new)
            messages.success(request, "Queued again with your changes.")
            return redirect("jobs-detail", job_id=new.pk)
    pool = [] if job.pinned else pool_devices(request.user, job.kind)
    ctx = new_job_context(request, job.device, job.kind, form=form, again=job, pool=pool)
    return render(request, "jobs/new.html", ctx, status=400 if request.method == "POST" else 200)


# -- the job page ---------------------------------------------------------------------------------------------
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for(request.user, job_id)
    return render(request, DETAIL, detail_context(request, job_with_related(job.pk)))


@require_GET
def job_next(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's "Use this result" box again (asked for when the job's state changes on the page)."""
    job = job_for(request.user, job_id)
    ctx = {"job": job, "result_actions": actions_for(request.user, job)}
    return render(request, f"{DETAIL}#job-next", ctx)


@require_GET
def job_npu(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for(request.user, job_id)
    return render(request, f"{DETAIL}#npu-timeline", {"job": job, "spark": job_spark(job)})


@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _managed_job(request, job_id)
    form = CancelForm(request.POST)
    form.is_valid()  # the reason is optional and bounded; an over-long one is cut, never refused
    try:
        services.job_cancel(job=job, by=request.user, reason=form.cleaned_data.get("reason", ""))
    except ValidationError as exc:
        _service_error(request, exc)
    else:
        messages.success(request, "Cancelled.")
    return redirect(_back(request, reverse("jobs-detail", args=[job.pk])))


@require_POST
def job_retry(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _managed_job(request, job_id)
    try:
        again = services.job_retry(job=job, by=request.user)
    except ValidationError as exc:
        _service_error(request, exc)
        return redirect("jobs-detail", job_id=job.pk)
    messages.success(request, "Queued again.")
    return redirect("jobs-detail", job_id=getattr(again, "pk", job.pk))


@require_POST
def job_share(request: HttpRequest, job_id: int) -> HttpResponse:
    """Share with the household (or make private again)."""
    job = _managed_job(request, job_id)
    services.job_set_shared(job=job, by=request.user, shared=request.POST.get("shared") == "1")
    return _actions_response(request, job)


@require_POST
def job_share_link(request: HttpRequest, job_id: int) -> HttpResponse:
    """Create or revoke the read-only link (a new link gets a new token; a revoked one stops working)."""
    job = _managed_job(request, job_id)
    services.job_share_link(job=job, by=request.user, enable=request.POST.get("enable") == "1")
    return _actions_response(request, job)


@require_POST
def job_share_link_options(request: HttpRequest, job_id: int) -> HttpResponse:
    """The read-only link's expiry and password (jobs.core.share_links)."""
    job = _managed_job(request, job_id)
    try:
        services.job_share_link_options(
            job=job,
            by=request.user,
            expires=request.POST.get("expires", "keep"),
            password=request.POST.get("password", ""),
            remove_password=request.POST.get("remove_password") == "1",
        )
    except ValidationError as exc:
        if request.htmx:
            ctx = detail_context(request, job, light=True)
            ctx["share_error"] = " ".join(exc.messages)
            return render(request, f"{DETAIL}#job-actions", ctx, status=400)
        _service_error(request, exc)
    return _actions_response(request, job)


def _actions_response(request: HttpRequest, job) -> HttpResponse:
    """After a sharing change: the actions box for htmx, the job page otherwise."""
    job.refresh_from_db()
    if request.htmx:
        return render(request, f"{DETAIL}#job-actions", detail_context(request, job, light=True))
    return redirect("jobs-detail", job_id=job.pk)


@require_POST
def job_bookmark(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for(request.user, job_id)
    bookmark_toggle(user=request.user, job=job)
    if not request.htmx:
        return redirect(_back(request, reverse("jobs-detail", args=[job.pk])))
    if request.POST.get("from") == "detail":
        return render(request, f"{DETAIL}#job-actions", detail_context(request, job, light=True))
    return render(
        request, f"{PARTS}#bookmark-form", {"job": job, "bookmarked": is_bookmarked(request.user, job)}
    )


@require_safe  # HEAD too: players probe a file before fetching ranges
def job_file(request: HttpRequest, job_id: int, artifact_id: int) -> HttpResponse:
    job = job_for(request.user, job_id)
    artifact = get_object_or_404(job.artifacts, pk=artifact_id)
    return artifact_response(request, artifact, inline=not request.GET.get("download"))


# -- the read-only link: the token is the permission, and it shows that one result only ----------------------
# Its expiry, password and count of opens: jobs.core.share_links (410 past the expiry; the password once per session).
@login_not_required
@require_http_methods(["GET", "HEAD", "POST"])
def job_public(request: HttpRequest, token: str) -> HttpResponse:
    job = job_by_share_token(token)
    if request.method == "POST" and not (share_links.has_password(job) and not share_links.is_expired(job)):
        return redirect("jobs-public", token=token)  # nothing to unlock: the page says what it is
    if request.method == "POST":
        return password_given(request, job) or redirect("jobs-public", token=token)
    refusal = link_refusal(request, job, page=True)
    if refusal is not None:
        return refusal
    if request.method == "GET":
        share_links.count_open(job)
    ctx = job_context(job_with_related(job.pk), share_token=token, public=True)
    return render(request, "jobs/public.html", ctx)


@login_not_required
@require_safe  # HEAD too: players probe a file before fetching ranges
def job_public_file(request: HttpRequest, token: str, artifact_id: int) -> HttpResponse:
    job = job_by_share_token(token)
    if (refusal := link_refusal(request, job, page=False)) is not None:
        return refusal
    artifact = get_object_or_404(job.artifacts, pk=artifact_id)
    return artifact_response(request, artifact, share_token=token, inline=not request.GET.get("download"))


# -- gallery & history ------------------------------------------------------------------------------------------
@require_GET
@kept_page
def gallery(request: HttpRequest) -> HttpResponse:
    form = GalleryFilterForm(request.GET, user=request.user)
    page = gallery_page(request.user, form, cursor=request.GET.get("cursor", ""))
    page.cards = with_actions(request.user, page.cards)  # "Animate", "Make 3D"… on finished results
    page.cards = with_album_action(request.user, page.cards)
    ctx = {"form": form, "page": page, "kinds": JobKind.choices}
    if form.is_valid() and form.cleaned_data.get("batch"):
        ctx["groups"] = batch_groups(request.user, [form.cleaned_data["batch"]])
    if request.htmx and request.GET.get("cursor"):
        return render(request, "jobs/gallery.html#gallery-more", ctx)  # "Show older": append cards
    if request.htmx:
        return render(request, "jobs/gallery.html#gallery-results", ctx)
    return render(request, "jobs/gallery.html", ctx)


# -- queue control ----------------------------------------------------------------------------------------------
@require_GET
@kept_page
def queue(request: HttpRequest) -> HttpResponse:
    """Everyone sees every device's queue, ``QUEUE_PAGE_SIZE`` entries a page; admins also get the controls.

    ``?device=<id>&page=<n>`` pages that device's plan (``?page=`` alone: every device's); a page out of range
    shows the nearest one. An htmx GET naming a device is the queue page asking for that device's list again
    after a push of the plan (``jobs/queue.html``): that list alone.
    """
    admin = request.user.is_admin
    paged = parse_id(request.GET.get("device"))
    page = parse_int(request.GET.get("page"), 1, minimum=1)
    if request.htmx and paged is not None:
        device = get_object_or_404(Device, pk=paged)
        ctx = queue_context(device, admin=admin, page=page)
        return render(request, f"{PARTS}#device-queue", {**ctx, "more": 0})
    shown = list(Device.objects.order_by("name"))
    plans = PagePlan.for_devices(shown)
    devices = [
        queue_context(
            d, admin=admin, page=page if paged in (None, d.pk) else 1, summary=admin, plan=plans[d.pk]
        )
        for d in shown
    ]
    watch = ",".join(f"queue:{q['device'].pk}" for q in devices if q["pager"]["page"] == 1)
    ctx = {"devices": devices, "watch": watch, "groups": active_batches(request.user)}
    return render(request, "jobs/queue.html", ctx)


@require_POST
def batch_cancel(request: HttpRequest, batch: str) -> HttpResponse:
    """ "Cancel the batch": every job of it still waiting or running (its owner or an admin)."""
    if not jobs_visible_to(request.user).filter(batch=batch).exists():
        raise Http404("No such batch.")
    form = CancelForm(request.POST)
    form.is_valid()
    batches.batch_cancel(batch=batch, by=request.user, reason=form.cleaned_data.get("reason", ""))
    messages.success(request, f"Cancelled the batch ({batch_counts([batch])[batch].text}).")
    return redirect(_back(request, f"{reverse('jobs-gallery')}?batch={batch}"))


def _after_queue_change(request: HttpRequest, device: Device) -> HttpResponse:
    """The admins' control box as it is now (htmx), or back to the queue page; on the page it was sent from."""
    page = parse_int(request.POST.get("page"), 1, minimum=1)
    if request.htmx:
        device.refresh_from_db()  # the service changed the row (paused flag, order) behind this instance
        return render(request, f"{PARTS}#queue-admin", queue_context(device, admin=True, page=page))
    if page > 1:
        return redirect(f"{reverse('jobs-queue')}?device={device.pk}&page={page}#q-{device.pk}")
    return redirect("jobs-queue")


@admin_required
@require_POST
def queue_pause(request: HttpRequest, device_id: int) -> HttpResponse:
    device = device_get_for(request.user, device_id)
    services.queue_pause(device=device, by=request.user)
    return _after_queue_change(request, device)


@admin_required
@require_POST
def queue_resume(request: HttpRequest, device_id: int) -> HttpResponse:
    device = device_get_for(request.user, device_id)
    services.queue_resume(device=device, by=request.user)
    return _after_queue_change(request, device)


@admin_required
@require_POST
def queue_move(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for(request.user, job_id)
    form = DirectionForm(request.POST)
    if not form.is_valid():
        return HttpResponse("Choose up or down.", status=400, content_type="text/plain")
    try:
        services.queue_move(job=job, by=request.user, direction=form.cleaned_data["direction"])
    except ValidationError as exc:
        _service_error(request, exc)
    return _after_queue_change(request, job.device)


@admin_required
@require_POST
def queue_run_next(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for(request.user, job_id)
    try:
        services.queue_run_next(job=job, by=request.user)
    except ValidationError as exc:
        _service_error(request, exc)
    return _after_queue_change(request, job.device)


@require_GET
def device_sparkline(request: HttpRequest, device_id: int) -> HttpResponse:
    """The dashboard's one-hour NPU sparkline, redrawn every minute from the stored history."""
    device = device_get_for(request.user, device_id)
    now = timezone.now()
    spark = sparkline(device.pk, since=now - dt.timedelta(hours=1), until=now)
    return render(request, "dashboard.html#sparkline", {"device": device, "spark": spark})


# -- a job's inputs and live preview (jobs.files.inputs): the same access rules and file serving as its results ---------
@require_safe  # HEAD too: the voice reference's <audio> probes before fetching ranges
def job_input(request: HttpRequest, job_id: int, name: str) -> HttpResponse:
    return input_response(request, job_for(request.user, job_id), name)


@login_not_required
@require_safe
def job_public_input(request: HttpRequest, token: str, name: str) -> HttpResponse:
    job = job_by_share_token(token)
    if (refusal := link_refusal(request, job, page=False)) is not None:
        return refusal
    return input_response(request, job, name, share_token=token)


@require_safe
def job_preview(request: HttpRequest, job_id: int) -> HttpResponse:
    """The latest preview the device streamed, as the worker left it in the store (no device request)."""
    return preview_response(request, job_for(request.user, job_id))


@require_GET
def job_preview_box(request: HttpRequest, job_id: int) -> HttpResponse:
    """The page's preview box, polled while the job runs: 204 while nothing changed, empty once it is over."""
    job = job_for(request.user, job_id)
    preview = preview_box(job, style_of=style_of)
    if not preview["show"]:
        return HttpResponse("")  # finished: the box goes (the result takes its place)
    mode = "a" if preview["active"] else "w"
    if request.GET.get("v", "") == preview["version"] and request.GET.get("m") == mode:
        return HttpResponse(status=204)  # htmx keeps the element, and its polling, as they are
    return render(request, f"{DETAIL}#job-preview", {"job": job})


# -- the dashboard (the jobs app builds it: jobs.doors.pages.dashboard_context) ------------------------------------
@require_GET
@kept_page
def dashboard(request: HttpRequest) -> HttpResponse:
    """Devices (state, gauges, last hour), what runs now, the queue plan, and my recent jobs."""
    return render(request, "dashboard.html", dashboard_context(request.user))
