"""The access matrix: every URL pattern × the five people × each method, against what is declared per view.

The patterns come from the URL configuration itself (``matrix_support.url_patterns``), so a new view without
a line in ``access_declarations`` fails here with its name. Each request runs in a savepoint that is rolled
back, so one person's POST (cancel, revoke, pause, sign out) never changes what the next one sees.

Besides the status, every answer is searched for the private markers (the private job's prompt, its file's
bytes, its read-only link's token, the queued private prompt, the device's address and key, everyone's raw
API token) that the person asking must not see — in the body and in every header.

``ACCESS_MATRIX_OBSERVE=1`` prints the observed table in the declarations' format (to draft a new view's
line; never copy it without reading it: the declaration is what *should* happen).
"""

from __future__ import annotations

import copy
import os
import time
from collections import Counter

import pytest
from django.conf import settings
from django.db import transaction
from django.shortcuts import resolve_url
from django.test import Client

from hub.tests import access_declarations as decl
from hub.tests.matrix_support import ROLES, body_of, build_world, fill, kwarg_values, url_patterns

pytestmark = pytest.mark.django_db

HEADERS_SKIPPED = {"Content-Length", "Date", "Vary"}
#: Where a marker must show (the search must find it there, or it proves nothing elsewhere).
MUST_SHOW = [
    ("jobs-detail", "owner", "private prompt"),
    ("jobs-detail", "admin", "private prompt"),
    ("jobs-detail", "owner", "private share token"),
    ("jobs-file", "owner", "private file bytes"),
    ("api:job_get", "owner", "private prompt"),
    ("devices-detail", "admin", "device address"),
]


@pytest.fixture
def world(admin_user, member, other_member, viewer, media):
    people = {"viewer": viewer, "owner": member, "other": other_member, "admin": admin_user}
    return build_world(people=people, media_root=media)


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def clients_for(world) -> dict[tuple[str, str], Client]:
    """(door, role) -> a client: a signed-in session for pages, a Bearer token for /api/ and /v1/."""
    out: dict[tuple[str, str], Client] = {}
    for role in ROLES:
        page = Client()
        if role != "anon":
            page.force_login(world.people[role])
        out["page", role] = page
        token = {"HTTP_AUTHORIZATION": f"Bearer {world.raw_tokens[role]}"} if role != "anon" else {}
        out["api", role] = out["v1", role] = Client(**token)
    return out


def outcome(response) -> str:
    status = response.status_code
    if status in (301, 302, 303, 307, 308):
        location = response.get("Location", "")
        if location.startswith("/admin/login/"):
            return "admin-login"
        if location.startswith(resolve_url(settings.LOGIN_URL)):
            return "login"
        return "ok"
    if status < 300 or status == 304:
        return "ok"
    if status in (400, 422):
        return "400"
    return str(status)


def send(client: Client, door: str, method: str, path: str):
    """One request, its effects rolled back (the database's, and the client's cookies: signing out must not
    sign the next request out). An exception from the view is a finding, not a crash here."""
    cookies = copy.deepcopy(client.cookies)
    with transaction.atomic():
        try:
            if method == "POST" and door == "page":
                response = client.post(path, {})
            elif method in ("POST", "PUT", "PATCH"):
                response = client.generic(method, path, "{}", content_type="application/json")
            else:
                response = client.generic(method, path)
            body = body_of(response)
        except Exception as exc:  # noqa: BLE001 - reported with the request that raised it
            response, body = None, f"{type(exc).__name__}: {exc}".encode()
        transaction.set_rollback(True)
    client.cookies = cookies
    return response, body


def declaration_problems() -> list[str]:
    problems = []
    patterns = url_patterns()
    for pattern in patterns:
        rule = decl.rule_for(pattern.key)
        if rule is None:
            problems.append(
                f"{pattern.key} (/{pattern.route}) has no declaration in hub/tests/access_declarations.py: "
                "say what each of anon, viewer, owner, other, admin gets for " + ", ".join(pattern.methods)
            )
            continue
        for method in pattern.methods:
            if decl.expected(rule, method, "private") is None:
                problems.append(f"{pattern.key}: no expectation for {method}")
        if "shared" in decl.variants(pattern) and "shared" not in rule:
            problems.append(f"{pattern.key} names a job: declare its 'shared' outcomes too (or 'same')")
    keys = {p.key for p in patterns}
    stale = [k for k in decl.DECLARATIONS if k not in keys]
    problems += [f"{k} is declared but no URL pattern has that name any more" for k in stale]
    return problems


def test_every_url_pattern_has_a_declaration():
    problems = declaration_problems()
    assert not problems, "\n".join(problems)


def test_a_new_view_without_a_declaration_is_named(monkeypatch):
    from django.http import HttpResponse
    from django.urls import clear_url_caches, path

    import hub.urls

    monkeypatch.setattr(
        hub.urls, "urlpatterns", [*hub.urls.urlpatterns, path("brand-new/", HttpResponse, name="brand-new")]
    )
    clear_url_caches()
    try:
        problems = declaration_problems()
    finally:
        monkeypatch.undo()
        clear_url_caches()
    assert any(p.startswith("brand-new (/brand-new/) has no declaration") for p in problems), problems


def test_the_access_matrix(world):
    clients = clients_for(world)
    values = {v: kwarg_values(world, v) for v in ("private", "shared", "link", "foreign")}
    failures: list[str] = []
    observed: dict[str, dict[str, dict[str, str]]] = {}
    counts: Counter = Counter()
    shown: set[tuple[str, str, str]] = set()
    methods: Counter = Counter()
    started = time.monotonic()
    for pattern in url_patterns():
        rule = decl.rule_for(pattern.key)
        if rule is None and os.environ.get("ACCESS_MATRIX_OBSERVE"):
            rule = {m: decl.ANY for m in pattern.methods} | {"shared": "same"}
        if rule is None:
            continue  # test_every_url_pattern_has_a_declaration names it
        counts["patterns"] += 1
        for variant in decl.variants(pattern):
            try:
                path = fill(pattern.route, values[variant])
            except KeyError as exc:
                failures.append(f"{pattern.key}: no value for the URL parameter {exc} (matrix_support)")
                continue
            for method in pattern.methods:
                methods[method] += 1
                want = decl.expected(rule, method, variant)
                got_row = []
                for role, wanted in zip(ROLES, want or ("?",) * len(ROLES), strict=True):
                    response, body = send(clients[pattern.door, role], pattern.door, method, path)
                    counts["requests"] += 1
                    got = "raised" if response is None else outcome(response)
                    got_row.append(got)
                    where = f"{method} {path} as {role} ({pattern.key}, {variant} job)"
                    if got not in wanted.split("|"):
                        detail = body[:300].decode(errors="replace") if got in ("raised", "500") else ""
                        failures.append(f"{where}: got {got}, declared {wanted} {detail}".rstrip())
                    if response is not None:
                        shown.update((pattern.key, role, what) for what, text in world.markers.items()
                                     if text.encode() in body)  # fmt: skip
                        headers = " ".join(
                            f"{k}: {v}" for k, v in response.items() if k not in HEADERS_SKIPPED
                        ).encode()
                        for what, text in world.forbidden_for(role).items():
                            if text.encode() in body or text.encode() in headers:
                                failures.append(f"{where}: the {what} reached {role}")
                observed.setdefault(pattern.key, {}).setdefault(variant, {})[method] = " ".join(got_row)
    elapsed = time.monotonic() - started
    if os.environ.get("ACCESS_MATRIX_OBSERVE"):
        with open(os.environ["ACCESS_MATRIX_OBSERVE"], "w") as out:
            for key, by_variant in observed.items():
                print(f"    {key!r}: {by_variant},", file=out)
    print(
        f"access matrix: {counts['patterns']} URL patterns, {len(ROLES)} roles, "
        f"methods {dict(methods)}, "
        f"{counts['requests']} requests in {elapsed:.1f} s"
    )
    failures += [f"{key} as {role} should show the {what}, and did not" for key, role, what in MUST_SHOW
                 if (key, role, what) not in shown]  # fmt: skip
    assert not failures, f"{len(failures)} access failures:\n" + "\n".join(failures)


def test_the_matrix_notices_a_leak_and_a_wrong_status(world):
    """The checks above can fail: a marker in a body is found, and a different status is a mismatch."""
    from django.http import HttpResponse

    leaking = HttpResponse(f"<p>{world.markers['private prompt']}</p>")
    forbidden = world.forbidden_for("other")
    assert any(text.encode() in body_of(leaking) for text in forbidden.values())
    assert outcome(HttpResponse(status=404)) not in "ok".split("|")
    redirect = HttpResponse(status=302)
    redirect["Location"] = resolve_url(settings.LOGIN_URL) + "?next=/jobs/1/"
    assert outcome(redirect) == "login"
