"""Headers every page carries (CSP, Permissions-Policy, no caching of private pages), no inline script
anywhere in the templates, and the password rules wherever a password is set."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as dj_settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from conftest import PASSWORD
from hub.accounts.models import User
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db


# Our own files, and WebAssembly compilation for model-viewer's meshopt decoder: no 'unsafe-inline', no
# 'unsafe-eval' (JavaScript eval stays refused).
SCRIPTS = ["'self'", "'wasm-unsafe-eval'"]


def directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


# --- Content-Security-Policy ----------------------------------------------------------------------------
def test_pages_allow_scripts_from_our_own_files_only(member_client, device):
    for url in ("/", "/jobs/", "/jobs/new/", "/jobs/queue/", "/devices/", f"/devices/{device.pk}/"):
        response = member_client.get(url)
        assert response.status_code == 200, url
        csp = directives(response)
        assert csp["script-src"] == SCRIPTS, url
        assert csp["default-src"] == ["'self'"] and csp["object-src"] == ["'none'"]
        assert csp["frame-ancestors"] == ["'none'"] and csp["base-uri"] == ["'self'"]


def test_the_policy_lets_the_live_socket_media_and_model_viewer_work(member_client):
    csp = directives(member_client.get("/"))
    assert {"'self'", "ws://testserver", "wss://testserver"} <= set(csp["connect-src"])
    assert set(csp["img-src"]) == {"'self'", "data:", "blob:"}
    assert set(csp["media-src"]) == {"'self'", "blob:"}
    assert "blob:" in csp["worker-src"]
    assert csp["style-src"] == ["'self'", "'unsafe-inline'"]  # style attributes only; styles run no code


def test_sockets_may_go_to_this_host_only(member_client, settings):
    """``ws:``/``wss:`` would let a page's script open a socket to any host; 'self' and the host asked cover ours."""
    settings.ALLOWED_HOSTS = ["hub.home.arpa"]
    csp = directives(member_client.get("/", HTTP_HOST="hub.home.arpa:8000"))
    sockets = [s for s in csp["connect-src"] if s.startswith("ws")]
    assert sockets == ["ws://hub.home.arpa:8000", "wss://hub.home.arpa:8000"]
    assert "*" not in csp["connect-src"] and not {"ws:", "wss:", "http:", "https:"} & set(csp["connect-src"])


def test_a_host_django_refuses_gets_its_error_page_with_no_socket_source(client, settings):
    settings.ALLOWED_HOSTS = ["hub.home.arpa"]
    response = client.get("/accounts/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert not [s for s in directives(response)["connect-src"] if s.startswith("ws")]


def test_the_login_page_and_the_public_share_page_carry_it_too(member, device):
    from jobs.queue.services import job_share_link

    assert directives(Client().get("/accounts/login/"))["script-src"] == SCRIPTS
    job = job_share_link(job=make_job(member, device, state="done"), by=member, enable=True)
    response = Client().get(f"/jobs/shared/{job.share_token}/")
    assert response.status_code == 200 and directives(response)["script-src"] == SCRIPTS


def test_api_docs_render_under_the_policy_with_external_scripts_only(member_client):
    response = member_client.get("/api/docs")
    assert response.status_code == 200 and directives(response)["script-src"] == SCRIPTS
    html = response.content.decode()
    scripts = re.findall(r"<script([^>]*)>", html)
    assert scripts, "swagger needs its scripts"
    for attrs in scripts:
        # Either an external file or a JSON data block (never executed, so CSP doesn't govern it).
        assert "src=" in attrs or 'type="application/json"' in attrs, attrs


TEMPLATES = Path(dj_settings.BASE_DIR) / "templates"
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/(?:ld\+)?json\")[^>]*>", re.I)
INLINE_HANDLER = re.compile(r"\s(on[a-z]+|hx-on[:\-][\w:\-]*)\s*=", re.I)
JS_URL = re.compile(r"""(href|src|action)\s*=\s*["']\s*javascript:""", re.I)


@pytest.mark.parametrize(
    "path", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: str(p.relative_to(TEMPLATES))
)
def test_no_template_carries_inline_script(path):
    text = path.read_text()
    assert not INLINE_SCRIPT.search(text), "move it to static/js/"
    assert not INLINE_HANDLER.search(text), "inline on*=/hx-on handlers are inline script: use static/js/"
    assert not JS_URL.search(text)


def test_the_template_check_itself_catches_each_form():
    assert INLINE_SCRIPT.search("<script>alert(1)</script>")
    assert INLINE_SCRIPT.search('<script type="module">x</script>')
    assert not INLINE_SCRIPT.search('<script src="/static/a.js" defer></script>')
    assert not INLINE_SCRIPT.search('<script type="application/json" id="s">{}</script>')
    assert INLINE_HANDLER.search('<input onfocus="this.select()">')
    assert INLINE_HANDLER.search('<button hx-on:click="x()">')
    assert INLINE_HANDLER.search('<button hx-on::after-request="x()">')
    assert not INLINE_HANDLER.search('<input data-select-on-focus aria-label="one">')


def test_copy_fields_select_through_the_static_script(member_client, member, device):
    from jobs.queue.services import job_share_link

    job = job_share_link(job=make_job(member, device, state="done"), by=member, enable=True)
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert re.search(r'id="share-url"[^>]*data-select-on-focus', html)
    assert "/static/js/focus-select.js" in html
    js = (Path(dj_settings.BASE_DIR) / "static/js/focus-select.js").read_text()
    assert "data-select-on-focus" in js and ".select()" in js


# --- Permissions-Policy -----------------------------------------------------------------------------------
def test_powerful_features_are_refused_on_every_page(member_client):
    for response in (member_client.get("/"), Client().get("/accounts/login/"), Client().get("/healthz")):
        policy = response["Permissions-Policy"]
        for feature in ("camera", "microphone", "geolocation", "payment", "usb"):
            assert f"{feature}=()" in policy


# --- Cache-Control ----------------------------------------------------------------------------------------
def test_private_pages_and_fragments_are_never_stored(member_client, member, device):
    job = make_job(member, device)
    for url, headers in (
        ("/", {}),
        (f"/jobs/{job.pk}/", {}),
        ("/jobs/queue/", {"HX-Request": "true"}),
        (f"/jobs/{job.pk}/npu/", {"HX-Request": "true"}),
        ("/api/jobs", {}),
    ):
        response = member_client.get(url, headers=headers)
        assert response.status_code == 200, url
        assert response["Cache-Control"] == "private, no-store", url
        assert "Cookie" in response["Vary"], url


def test_a_post_answer_for_a_signed_in_person_is_not_stored_either(member_client, member, device):
    job = make_job(member, device)
    response = member_client.post(f"/jobs/{job.pk}/bookmark/", headers={"HX-Request": "true"})
    assert response.status_code < 400 and "no-store" in response["Cache-Control"]


def test_result_files_keep_revalidating_and_icons_stay_public(member_client, member, device, media):
    job = make_job(member, device, state="done")
    art = add_artifact(job, media)
    response = member_client.get(f"/jobs/{job.pk}/files/{art.pk}/")
    assert response.status_code == 200 and response["Cache-Control"] == "private, no-cache"
    assert response["ETag"]
    assert member_client.get("/favicon.ico")["Cache-Control"] == "public, max-age=86400"


def test_static_files_are_not_marked_private(member_client):
    response = member_client.get("/static/js/hub.js")
    assert response.status_code == 200 and "no-store" not in response.get("Cache-Control", "")


# --- Passwords --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("password", "why"),
    [
        ("short-pw1", "too short"),
        ("password123", "too common"),
        ("4815162342108", "entirely numeric"),
        ("kimberly-kim", "too similar"),
        ("x" * 129, "too long"),
    ],
)
def test_create_user_refuses_weak_passwords(password, why):
    with pytest.raises(CommandError, match=why):
        call_command("create_user", "kimberly-kim", "--password", password, stdout=StringIO())
    assert not User.objects.filter(username="kimberly-kim").exists()


def test_create_user_takes_a_good_long_one():
    call_command("create_user", "kim", "--password", "x9" * 64, stdout=StringIO())
    assert User.objects.get(username="kim").check_password("x9" * 64)


def test_the_people_page_applies_the_rules(admin_client):
    response = admin_client.post(
        "/accounts/people/add/", {"username": "newbie", "role": "member", "password": "newbie2024"}
    )
    assert response.status_code == 400 and b"too similar" in response.content
    assert not User.objects.filter(username="newbie").exists()
    response = admin_client.post(
        "/accounts/people/add/", {"username": "newbie", "role": "member", "password": "tangerine-moss-41"}
    )
    assert response.status_code == 200 and User.objects.get(username="newbie").check_password(
        "tangerine-moss-41"
    )


def test_the_password_page_applies_the_rules(member_client, member):
    weak = member_client.post(
        "/accounts/password/",
        {"old_password": PASSWORD, "new_password1": "12345678901", "new_password2": "12345678901"},
    )
    assert weak.status_code == 400 and b"entirely numeric" in weak.content
    long = "y" * 200
    too_long = member_client.post(
        "/accounts/password/", {"old_password": PASSWORD, "new_password1": long, "new_password2": long}
    )
    assert b"too long" in too_long.content
    member.refresh_from_db()
    assert member.check_password(PASSWORD)
    ok = member_client.post(
        "/accounts/password/",
        {"old_password": PASSWORD, "new_password1": "quiet-harbour-77", "new_password2": "quiet-harbour-77"},
    )
    assert ok.status_code == 302
    member.refresh_from_db()
    assert member.check_password("quiet-harbour-77")


def test_the_admin_applies_the_rules(admin_client):
    response = admin_client.post(
        "/admin/accounts/user/add/",
        {
            "username": "adm-made",
            "password1": "abc",
            "password2": "abc",
            "usable_password": "true",
            "role": "member",
        },
    )
    assert response.status_code == 200 and b"too short" in response.content
    assert not User.objects.filter(username="adm-made").exists()


# --- in Chromium: nothing the policy blocks ---------------------------------------------------------------
# Playwright's init script is injected by the browser itself, so the policy doesn't stop it from listening.
LISTEN = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


@pytest.mark.browser
@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_no_page_trips_the_policy_in_chromium(signed_in_page, admin_user, member, device):
    from devices.emulator.media import glb_bytes

    video = make_job(member, device, state="done")
    mesh = make_job(member, device, kind="mesh", state="done")
    media_root = Path(dj_settings.MEDIA_ROOT)  # the live server's too: same environment
    add_artifact(video, media_root)
    add_artifact(
        mesh,
        media_root,
        kind="mesh",
        name="model.glb",
        mime="model/gltf-binary",
        data=glb_bytes(textured=True),
    )
    messages: list[str] = []
    try:
        page = signed_in_page(member)
        page.context.add_init_script(LISTEN)
        page.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))

        def visit(url: str, ready: str | None = None) -> None:
            page.goto(url)
            page.wait_for_load_state("networkidle")
            if ready:  # a function: Playwright evals a bare expression in the page, which the CSP refuses
                try:
                    page.wait_for_function(f"() => {ready}", timeout=30000)
                except Exception as exc:  # noqa: BLE001 - say what the page said
                    pytest.fail(f"{url}: {exc}; policy: {page.evaluate('window.__csp')}; console: {messages}")
            violations = page.evaluate("window.__csp")
            assert violations == [], f"{url}: {violations}"

        visit("/", "document.body.dataset.live === 'open'")  # htmx + its websocket extension connected
        visit(f"/jobs/{video.pk}/", "document.body.dataset.live === 'open'")
        visit(
            f"/jobs/{mesh.pk}/",
            "document.querySelector('model-viewer') && document.querySelector('model-viewer').loaded === true",
        )
        visit(f"/jobs/new/?device={device.pk}&kind=video", "typeof htmx !== 'undefined'")
        page.fill("#id_prompt", "a heron at dawn")  # the admission summary re-renders through htmx
        page.wait_for_timeout(800)
        page.wait_for_function("() => !document.querySelector('.htmx-request')")
        visit(f"/jobs/new/?device={device.pk}&kind=mesh")
        visit(f"/devices/{device.pk}/", "typeof uPlot !== 'undefined'")
        visit("/jobs/queue/")
        # Swagger UI's bundle ran and drew its frame (what it then says about the schema is the API's business).
        visit("/api/docs", "document.querySelector('#swagger-ui .swagger-ui') !== null")
        admin = signed_in_page(admin_user)
        admin.context.add_init_script(LISTEN)
        admin.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
        for url in ("/admin/", "/admin/axes/accessattempt/", f"/admin/accounts/user/{member.pk}/change/"):
            admin.goto(url)
            admin.wait_for_load_state("networkidle")
            assert admin.evaluate("window.__csp") == [], url
    finally:
        import shutil

        shutil.rmtree(media_root / "results" / str(member.pk), ignore_errors=True)
    csp = [m for m in messages if "Content Security Policy" in m or "Content-Security-Policy" in m]
    assert csp == [], csp
    policy = [m for m in messages if "Permissions-Policy" in m or "Permissions policy" in m]
    assert policy == [], policy
