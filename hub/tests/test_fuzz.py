"""Property-based fuzzing (hypothesis) of every form, POST route and API operation.

- Pages: every URL pattern of the site (from the URL walk, the admin aside) gets POSTs of random fields —
  the forms' real field names with hostile values (unicode digits, huge numbers, extreme dates, empty, very
  long strings, lists where one value is expected, wrong types) and random names — and GETs with such a query.
- REST API: every operation in ``/api/openapi.json`` gets random JSON bodies built from its schema's property
  names, plus malformed JSON and wrong content types. ``/v1`` (not in the schema) likewise, from the URL walk.

Properties: no 5xx, no exception, no ERROR record in the logs (``django.request`` and every other logger), and
no Job created by a request answered 4xx. Every request runs in a savepoint that is rolled back.

Profiles: ``default`` (few examples, part of ``make test``; derandomized so CI is reproducible) and ``long``
(``make fuzz``): ``HYPOTHESIS_PROFILE=long``.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub.tests.matrix_support import build_world, fill, kwarg_values, url_patterns

settings.register_profile(
    "default",
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
settings.register_profile(
    "long",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

pytestmark = pytest.mark.django_db

# -- hostile values ------------------------------------------------------------------------------------------
HOSTILE = [
    "",
    " ",
    "0",
    "-1",
    "²",
    "٣",
    "１２",
    "1" * 5000,  # over Python's limit for int() of a string
    "9" * 40,
    "1e309",
    "nan",
    "inf",
    "-0",
    "0x10",
    "9999-12-31",
    "9999-12-31T23:59:59",
    "0001-01-01T00:00",
    "2026-02-30",
    "10000-01-01",
    "\x00",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "true",
    "null",
    "[]",
    "{}",
    "x" * 20000,
    "😀" * 50,
]
values = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=40),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.datetimes().map(lambda d: d.isoformat()),
)
EXTRA_NAMES = [
    "kind", "device", "next", "shared", "enable", "from", "cursor", "submit_token", "model", "when",
    "not_before", "role", "active", "username", "password", "old_password", "new_password1", "new_password2",
    "name", "scopes", "api_key", "base_url", "direction", "reason", "seconds", "size", "steps", "seed",
    "polite", "voice", "input", "prompt", "n", "format", "stages", "limit", "after", "order", "state", "q",
]  # fmt: skip


def form_field_names() -> list[str]:
    """The real field names of every form of the project."""
    import django.forms

    import devices.forms  # noqa: F401 - imported for their Form subclasses
    import hub.accounts.forms  # noqa: F401
    import jobs.doors.filters
    import jobs.kinds.forms  # noqa: F401

    names: set[str] = set(EXTRA_NAMES)
    todo = list(django.forms.Form.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in ("jobs", "devices", "hub"):
            names.update(getattr(cls, "base_fields", {}))
    return sorted(names)


FIELD_NAMES = form_field_names()
field_names = st.one_of(st.sampled_from(FIELD_NAMES), st.text(min_size=1, max_size=12))
form_data = st.dictionaries(field_names, st.one_of(values, st.lists(values, max_size=3)), max_size=8)


def json_values(depth: int = 2):
    leaf = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**40), max_value=10**40),
        st.floats(allow_nan=False),
        st.sampled_from(HOSTILE),
        st.text(max_size=30),
    )
    return st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=8), inner, max_size=3), max_leaves=6)  # fmt: skip


# -- the world, the doors --------------------------------------------------------------------------------------
@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def world(admin_user, member, other_member, viewer, media, settings):
    settings.HUB_API_SUBMIT_RATE = "0"  # a limit would answer 429 and hide what the request does
    settings.HUB_V1_WAIT_S = 0.01  # a valid image/speech request would wait for a worker the test has not
    people = {"viewer": viewer, "owner": member, "other": other_member, "admin": admin_user}
    built = build_world(people=people, media_root=media)
    built.clients = {}
    for role, user in people.items():
        page = Client()
        page.force_login(user)
        built.clients["page", role] = page
        built.clients["api", role] = Client(HTTP_AUTHORIZATION=f"Bearer {built.raw_tokens[role]}")
    return built


class ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def check(client: Client, method: str, path: str, **kwargs: Any) -> None:
    """One request, rolled back; fails on a 5xx, an exception, an ERROR log, or a Job made by a refusal."""
    from jobs.models import Job

    errors = ErrorLog()
    logging.getLogger().addHandler(errors)
    cookies = copy.deepcopy(client.cookies)
    try:
        with transaction.atomic():
            before = Job.objects.count()
            try:
                response = client.generic(method, path, **kwargs) if method != "POST_FORM" else client.post(
                    path, kwargs.get("data", {}))  # fmt: skip
            except Exception as exc:
                raise AssertionError(f"{method} {path} raised {type(exc).__name__}: {exc}") from exc
            made = Job.objects.count() - before
            transaction.set_rollback(True)
    finally:
        logging.getLogger().removeHandler(errors)
        client.cookies = cookies
    status = response.status_code
    what = f"{method} {path} {str(kwargs)[:300]}"
    body = getattr(response, "content", b"")[:300] if not getattr(response, "streaming", False) else b""
    if path == "/healthz" and status == 503:
        pass  # "not ok": the test run has no worker or beat (test_healthz)
    elif status == 504 and b'"wait_timeout"' in body:
        assert made == 1, what  # a valid /v1 image or speech request, queued; nobody renders it here
    else:
        assert status < 500, f"{what} answered {status}: {body!r}"
    if (path == "/healthz" and status == 503) or (status == 504 and b'"wait_timeout"' in body):
        # Django logs every 5xx at ERROR, the designed ones too ("not ok"; "still queued after HUB_V1_WAIT_S")
        errors.records = [r for r in errors.records if r.name != "django.request" or r.exc_info]
    assert not errors.records, f"{what} logged {[(r.name, r.getMessage()[:200]) for r in errors.records]}"
    if status >= 400 and not (status == 504 and b'"wait_timeout"' in body):
        assert made == 0, f"{what} answered {status} but created {made} job(s)"


def page_patterns() -> list:
    return [
        p for p in url_patterns() if p.door == "page" and not p.key.startswith(("admin:", "route:admin/"))
    ]


PAGES = page_patterns()
#: The pages are fuzzed in this many parts, each its own test: one example's draws for every page at once went past
#: what hypothesis generates in one example (``data_too_large``) once the Groups pages came.
PAGE_PARTS = 2


@pytest.mark.parametrize("part", range(PAGE_PARTS))
@given(data=st.data())
def test_fuzz_every_page(world, data, part):
    """Each example posts a random form to every page of its part (and GETs it with the same fields as a query)."""
    for pattern in PAGES[part::PAGE_PARTS]:
        role = data.draw(st.sampled_from(["owner", "admin", "viewer"]), label=f"{pattern.key} role")
        variant = data.draw(st.sampled_from(["private", "shared"]), label=f"{pattern.key} job")
        fields = data.draw(form_data, label=f"{pattern.key} fields")
        path = fill(pattern.route, kwarg_values(world, variant))
        client = world.clients["page", role]
        check(client, "POST_FORM", path, data=fields)
        query = {k: v for k, v in fields.items() if isinstance(v, str) and len(v) < 2000}
        check(client, "GET", path, data=query)


# -- the APIs --------------------------------------------------------------------------------------------------
def api_operations() -> list[tuple[str, str, list[str]]]:
    """(method, path template, body property names) for every operation of the OpenAPI schema."""
    from hub.api import api

    schema = api.get_openapi_schema()
    components = schema.get("components", {}).get("schemas", {})
    out = []
    for route, item in schema["paths"].items():
        for method, op in item.items():
            if method.upper() not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                continue
            names: set[str] = set()
            for content in (op.get("requestBody") or {}).get("content", {}).values():
                ref = content.get("schema", {}).get("$ref", "")
                props = components.get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
                names.update(props or content.get("schema", {}).get("properties", {}))
            names.update(p["name"] for p in op.get("parameters", []) if p.get("in") == "query")
            out.append((method.upper(), route, sorted(names)))
    return out


def v1_operations() -> list[tuple[str, str, list[str]]]:
    from jobs.doors import v1

    names = sorted(v1.IMAGE_FIELDS | v1.SPEECH_FIELDS | getattr(v1, "VIDEO_FIELDS", set()))
    return [
        (method, "/" + p.route.replace("<str:", "{").replace("<int:", "{").replace("<path:", "{").replace(">", "}"), names)
        for p in url_patterns() if p.door == "v1" and "(?P" not in p.route for method in p.methods
    ]  # fmt: skip


API_OPERATIONS = api_operations() + v1_operations()


def api_path(world, template: str, variant: str) -> str:
    values = kwarg_values(world, variant)
    path = template
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path if path.startswith("/api/") or path.startswith("/v1/") else "/api" + path


def bodies(names: list[str]):
    known = st.dictionaries(st.sampled_from(names or ["x"]), json_values(), max_size=6)
    return st.one_of(known, st.dictionaries(st.text(max_size=10), json_values(), max_size=4), json_values())


@given(data=st.data())
def test_fuzz_every_api_operation(world, data):
    """Each example sends a random JSON body (or query) to every operation of /api/ and /v1/."""
    for method, template, names in API_OPERATIONS:
        role = data.draw(st.sampled_from(["owner", "admin", "viewer"]), label=f"{method} {template} role")
        variant = data.draw(st.sampled_from(["private", "shared"]), label=f"{method} {template} job")
        body = data.draw(bodies(names), label=f"{method} {template} body")
        path = api_path(world, template, variant)
        client = world.clients["api", role]
        if method == "GET":
            query = {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()} if isinstance(
                body, dict) else {}  # fmt: skip
            check(client, "GET", path, data=query)
        else:
            check(client, method, path, data=json.dumps(body), content_type="application/json")


MALFORMED = [
    (b"{", "application/json"),
    (b'{"prompt": "a fox",}', "application/json"),
    (b"\xff\xfe\x00", "application/json"),
    (b'{"a": ' * 2000 + b"1" + b"}" * 2000, "application/json"),  # deeper than the JSON parser likes
    (b'{"seconds": 1e999}', "application/json"),
    (b'{"seconds": ' + b"9" * 5000 + b"}", "application/json"),
    (b"prompt=a+fox", "application/x-www-form-urlencoded"),
    (b'{"prompt": "a fox"}', "text/plain"),
    (b"--xx\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nfox", "multipart/form-data; boundary=xx"),
    (b"garbage", "multipart/form-data"),
    (b"garbage", "multipart/form-data; boundary="),
    (b"", "application/json"),
    (b"null", "application/json"),
    (b"[]", "application/json"),
]  # fmt: skip


def test_malformed_bodies_and_wrong_content_types(world):
    for method, template, _ in API_OPERATIONS:
        if method == "GET":
            continue
        path = api_path(world, template, "private")
        for raw, content_type in MALFORMED:
            for role in ("owner", "admin"):
                check(world.clients["api", role], method, path, data=raw, content_type=content_type)
