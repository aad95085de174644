"""The submit page's own state between tries: its submit token, and the uploads a re-shown form keeps.

Split from ``jobs.doors.intake`` (which re-exports these names): only the page uses them, and nothing here needs the
rest of the intake.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from typing import Any

from django import forms
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpRequest

from jobs.files import store
from jobs.kinds.forms import JobForm

# -- the submit token (``templates/jobs/new.html``) -----------------------------------------------------------

#: The per-form idempotency token: random, URL-safe, bounded.
SUBMIT_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")


def submit_token_of(request: HttpRequest) -> str | None:
    """The form's idempotency token from a POST, when it is one (anything else means "no token")."""
    raw = request.POST.get("submit_token") if request.method == "POST" else None
    return raw if isinstance(raw, str) and SUBMIT_TOKEN.fullmatch(raw) else None


def new_submit_token() -> str:
    return secrets.token_urlsafe(24)


# -- uploads kept between tries (the page) ----------------------------------------------------------------------
# A browser can't pre-fill a file input, so a refused or invalid submit would make the person pick the picture
# (or the voice recording) again. The page keeps each upload that passed its checks, keyed by the person and the
# form's idempotency token (the token lives exactly as long as this filled-in form: it comes back with every
# try and a new render gets a new one), and uses it when the next try of the same form sends no file for that
# field. Queued (or abandoned for a day): the stash goes. Nobody else can reach it: the folder is named by a hash
# of the owner and the token, and only the submit page reads it, for the signed-in owner.
STASH_TTL_S = 24 * 3600


STASH = "stash"


def _stash_dir(user: Any, token: str) -> str:
    """The stash's folder in the store (``stash/<user>/<hash>``): on MEDIA_ROOT or the bucket, like the results, so
    any web process of the hub (on any machine) finds what another one kept."""
    digest = hashlib.sha256(f"{user.pk}:{token}".encode()).hexdigest()[:32]
    return f"{STASH}/{user.pk}/{digest}"


def _stash_prune() -> None:
    """Drop the stashes abandoned for a day (by the age of their first file)."""
    cutoff_ns = (time.time() - STASH_TTL_S) * 1_000_000_000
    for folder in store.subfolders(STASH, depth=2):
        files = store.files_in(folder)
        found = store.find(f"{folder}/{files[0]}", within=STASH) if files else None
        if found is not None and found.mtime_ns < cutoff_ns:
            store.delete([*(f"{folder}/{name}" for name in files), folder])  # the folder: on the filesystem


def stash_uploads(*, user: Any, token: str | None, files: dict[str, Any]) -> None:
    """Keep these (already checked) uploads for the next try of the form ``token`` names."""
    if not token or not files:
        return
    folder = _stash_dir(user, token)
    for name, f in files.items():
        f.seek(0)
        data = f.read()
        f.seek(0)
        store.save_bytes(f"{folder}/{name}.bin", data)
        meta = {
            "name": str(getattr(f, "name", "") or name)[-120:],
            "type": getattr(f, "content_type", "") or "",
            "size": len(data),
        }
        store.save_bytes(f"{folder}/{name}.json", json.dumps(meta).encode())
    try:
        _stash_prune()
    except OSError:
        pass  # pruning is housekeeping: a store that hiccups here must not refuse the form


def _stash_meta(folder: str, name: str) -> dict[str, Any]:
    info = json.loads(store.read_bytes(f"{folder}/{name}.json"))
    if not isinstance(info, dict):
        raise ValueError("not a stash entry")
    return info


def stashed_uploads(*, user: Any, token: str | None, names: list[str]) -> dict[str, SimpleUploadedFile]:
    """The uploads kept for the form ``token`` names, as fresh upload objects (the form checks them again)."""
    if not token:
        return {}
    folder = _stash_dir(user, token)
    out = {}
    for name in names:
        try:
            info = _stash_meta(folder, name)
            data = store.read_bytes(f"{folder}/{name}.bin")
        except (OSError, ValueError):
            continue
        out[name] = SimpleUploadedFile(info.get("name") or name, data, info.get("type") or "")
    return out


def stash_forget(*, user: Any, token: str | None, names: list[str] | None = None) -> None:
    """Drop the kept uploads (all of them, or those ``names``)."""
    if not token:
        return
    folder = _stash_dir(user, token)
    try:
        kept = (
            store.files_in(folder) if names is None else [f"{n}{x}" for n in names for x in (".bin", ".json")]
        )
    except OSError:
        return
    store.delete([f"{folder}/{name}" for name in kept] + ([folder] if names is None else []))


def stash_listing(*, user: Any, token: str | None, names: list[str]) -> dict[str, dict[str, Any]]:
    """What is kept, without reading the files: ``{field: {"name": file name, "kb": size}}``."""
    if not token:
        return {}
    folder = _stash_dir(user, token)
    out = {}
    for name in names:
        try:
            info = _stash_meta(folder, name)
            size = info.get("size")
            if not isinstance(size, int):  # kept before the size was noted
                found = store.find(f"{folder}/{name}.bin", within=STASH)
                if found is None:
                    continue
                size = found.size
        except (OSError, ValueError):
            continue
        out[name] = {"name": info.get("name") or name, "kb": max(1, round(size / 1024))}
    return out


def file_fields(form_or_class: Any) -> list[str]:
    fields = form_or_class.fields if isinstance(form_or_class, forms.BaseForm) else form_or_class.base_fields
    return [n for n, f in fields.items() if isinstance(f, forms.FileField)]


def uploads_for_try(request: HttpRequest, form_class: type[JobForm]) -> dict[str, Any]:
    """The files to bind a submitted form with: a new upload wins over a kept one, and a kept one the person
    ticked "don't use it" is dropped."""
    token = submit_token_of(request)
    names = file_fields(form_class)
    unstash = [n for n in request.POST.getlist("unstash") if n in names]
    stash_forget(user=request.user, token=token, names=unstash)
    wanted = [n for n in names if n not in request.FILES and n not in unstash]
    return {**stashed_uploads(user=request.user, token=token, names=wanted), **request.FILES.dict()}


def keep_uploads(request: HttpRequest, form: JobForm) -> None:
    """After a try that queued nothing (or before the fields are swapped for another model's): keep the uploads
    that passed their checks for the next try, drop those that didn't, and note on the form what the page shows
    next to each file input (``kept_uploads``; ``lost_uploads``: sent, but it must be chosen again)."""
    token = submit_token_of(request)
    names = file_fields(form)
    sent = {n: f for n, f in request.FILES.items() if n in names}
    good = {n: f for n, f in sent.items() if n not in form.errors}
    stash_uploads(user=request.user, token=token, files=good)
    stash_forget(user=request.user, token=token, names=[n for n in sent if n not in good])
    form.kept_uploads = stash_listing(
        user=request.user, token=token, names=[n for n in names if n not in form.errors]
    )
    form.lost_uploads = [n for n in sent if n not in form.kept_uploads]
