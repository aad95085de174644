"""The gallery's zip downloads: "Download all" for the current search and filters, "Download selected" for the
ticked cards (``/jobs/download/``), and the button's count (``/jobs/download/summary/``).

Both read the gallery's own parameters (``jobs.doors.filters.jobs_to_download``: only what the person may see);
the zip itself is ``jobs.files.zips.stream_jobs_zip``. An album comes down the same way (``/jobs/albums/<id>/download/``:
what ``jobs.core.albums.album_jobs`` lets the person see). A download that can't be made (nothing selected, no results,
too many jobs, a filter the form refuses) goes back to the gallery with the reason as a note: the person clicked a
link, so they get a page, not a bare 400.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_safe

from jobs.core import albums
from jobs.doors.filters import SelectionInvalid, jobs_to_download
from jobs.files.zips import NothingToDownload, TooManyJobs, jobs_zip_summary, stream_jobs_zip

#: Parameters of the download that are not the gallery's (left out of the way back to it).
_OWN = ("ids", "selection", "cursor")


def _gallery_with(params: QueryDict) -> str:
    back = params.copy()
    for name in _OWN:
        back.pop(name, None)
    query = back.urlencode()
    return reverse("jobs-gallery") + (f"?{query}" if query else "")


@require_safe
def download(request: HttpRequest) -> HttpResponse:
    """The zip of the gallery's current search (its filters in the query) or of a selection (``ids``)."""
    try:
        jobs = jobs_to_download(request.user, request.GET)
        return stream_jobs_zip(
            request, jobs, label="tiiny-hub-selection" if "ids" in request.GET else "tiiny-hub"
        )
    except (SelectionInvalid, NothingToDownload, TooManyJobs) as exc:
        messages.error(request, str(exc))
        return redirect(_gallery_with(request.GET))


@require_safe
def album_download(request: HttpRequest, album_id: int) -> HttpResponse:
    """An album's results that the person may see, as one zip (a stranger: 404, as the album page)."""
    album = albums.album_for(request.user, album_id)
    try:
        return stream_jobs_zip(request, albums.album_jobs(request.user, album), label=f"album-{album.pk}")
    except (NothingToDownload, TooManyJobs) as exc:
        messages.error(request, str(exc))
        return redirect("jobs-album", album.pk)


@require_GET
def download_summary(request: HttpRequest) -> HttpResponse:
    """The "Download all (N files, X MB)" link for the gallery's current filters (loaded after the page)."""
    try:
        totals = jobs_zip_summary(jobs_to_download(request.user, request.GET))
    except SelectionInvalid:
        totals = {"files": 0, "bytes": 0}
    query = request.GET.copy()
    for name in _OWN:
        query.pop(name, None)
    return render(
        request,
        "jobs/gallery.html#download-all",
        {"totals": totals, "download_query": query.urlencode(), "counted": True},
    )
