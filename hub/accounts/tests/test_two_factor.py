"""Two factors for local accounts: setting up an authenticator (QR, secret, recovery codes shown once), the code
after the password, recovery codes, lockout on guessed codes, HUB_ADMIN_2FA, and the doors that must not skip it."""

from __future__ import annotations

import re
import time

import pytest
from django.core.management import call_command
from django.test import Client
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice

from conftest import PASSWORD
from hub.accounts import two_factor
from hub.accounts.tokens import token_create


@pytest.fixture(autouse=True)
def _no_otp_delay(settings):
    # django-otp's own growing delay after a wrong code (its tests cover it) would refuse the right code that
    # follows a wrong one within a second; the lockout under test here is django-axes'.
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


def _code(device: TOTPDevice, *, ahead: int = 0) -> str:
    device.refresh_from_db()
    return f"{totp(device.bin_key, device.step, device.t0, device.digits, device.drift + ahead):06d}"


def _enrol(user) -> tuple[TOTPDevice, list[str]]:
    device = two_factor.enrolment_device(user)
    codes = two_factor.enrolment_confirm(user=user, device=device, code=_code(device))
    assert codes
    return device, codes


def _password(client: Client, user, next_url: str = ""):
    data = {"username": user.username, "password": PASSWORD}
    if next_url:
        data["next"] = next_url
    return client.post("/accounts/login/", data)


def test_setting_up_shows_a_qr_code_and_the_secret_then_recovery_codes_once(member_client, member):
    page = member_client.get("/accounts/2fa/setup/")
    html = page.content.decode()
    assert page.status_code == 200 and 'src="data:image/svg+xml' in html
    device = TOTPDevice.objects.get(user=member, confirmed=False)
    assert two_factor.secret_base32(device) in html and "<script" not in html.split("</header>")[-1]
    assert (
        member_client.get("/accounts/2fa/setup/").content.decode().count(two_factor.secret_base32(device))
        == 1
    )

    wrong = member_client.post(
        "/accounts/2fa/setup/", {"code": "000000" if _code(device) != "000000" else "111111"}
    )
    assert wrong.status_code == 400 and not two_factor.has_second_factor(member)

    done = member_client.post("/accounts/2fa/setup/", {"code": _code(device)})
    codes = re.findall(r"<li><code>([a-z0-9]+)</code></li>", done.content.decode())
    assert done.status_code == 200 and len(codes) == 10
    assert two_factor.has_second_factor(member)
    # The session that set it up stays signed in; the codes are not shown again.
    page = member_client.get("/accounts/2fa/")
    assert (
        page.status_code == 200
        and b"10 recovery codes left" in page.content
        and codes[0].encode() not in page.content
    )


def test_the_password_alone_signs_nobody_in_the_code_does(member):
    device, _ = _enrol(member)
    client = Client()
    answer = _password(client, member, "/jobs/")
    assert answer.status_code == 302 and answer["Location"] == "/accounts/2fa/code/"
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still signed out

    assert client.post("/accounts/2fa/code/", {"code": "12345"}).status_code == 400
    answer = client.post("/accounts/2fa/code/", {"code": _code(device, ahead=1)})
    assert answer.status_code == 302 and answer["Location"] == "/jobs/"
    assert int(client.session["_auth_user_id"]) == member.pk
    assert client.get("/").status_code == 200


def test_a_recovery_code_works_once(member):
    _, codes = _enrol(member)
    client = Client()
    _password(client, member)
    assert client.post("/accounts/2fa/code/", {"code": codes[0]}).status_code == 302
    assert two_factor.recovery_codes_left(member) == 9
    other = Client()
    _password(other, member)
    assert other.post("/accounts/2fa/code/", {"code": codes[0]}).status_code == 400
    assert "_auth_user_id" not in other.session


def test_guessed_codes_meet_the_sign_in_lockout(member, settings):
    settings.AXES_FAILURE_LIMIT = 3
    device, _ = _enrol(member)
    client = Client()
    _password(client, member)
    for guess in ("000001", "000002"):
        assert client.post("/accounts/2fa/code/", {"code": guess}).status_code == 400
    # The third wrong code locks: the sign-in page says until when (django-axes' lockout page).
    third = client.post("/accounts/2fa/code/", {"code": "000003"})
    assert third.status_code == 429 and b"Too many failed sign-ins" in third.content
    locked = client.post("/accounts/2fa/code/", {"code": _code(device, ahead=1)})
    assert locked.status_code == 429 and b"Too many wrong codes" in locked.content
    assert "_auth_user_id" not in client.session
    # The password page refuses them too, until the cool-off ends (or an admin unlocks them).
    assert _password(Client(), member).status_code == 429


def test_the_code_page_needs_a_password_first_and_forgets_it_after_five_minutes(member, time_machine):
    device, _ = _enrol(member)
    assert Client().get("/accounts/2fa/code/")["Location"] == "/accounts/login/"
    client = Client()
    _password(client, member)
    time_machine.move_to(time.time() + two_factor.PENDING_S + 1, tick=False)
    answer = client.post("/accounts/2fa/code/", {"code": _code(device)})
    assert answer["Location"] == "/accounts/login/" and "_auth_user_id" not in client.session


def test_the_admin_sites_sign_in_does_not_skip_the_code(admin_user):
    _enrol(admin_user)
    client = Client()
    answer = client.post(
        "/admin/login/?next=/admin/", {"username": admin_user.username, "password": PASSWORD}
    )
    assert answer["Location"] == "/accounts/login/?next=/admin/" and "_auth_user_id" not in client.session
    # Any other password door (here the test client's own login): the sign-in is undone as it is made.
    client.login(username=admin_user.username, password=PASSWORD)
    answer = client.get("/")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    assert "_auth_user_id" not in client.session


def test_with_admin_2fa_an_admin_without_it_sets_it_up_before_anything_else(admin_user, settings):
    settings.HUB_ADMIN_2FA = True
    _, token = token_create(user=admin_user, name="script", scopes=["read"])
    client = Client()
    assert _password(client, admin_user).status_code == 302
    for path in ("/", "/accounts/people/", "/devices/"):
        answer = client.get(path)
        assert answer.status_code == 302 and answer["Location"] == "/accounts/2fa/setup/", path
    assert client.get("/api/jobs").status_code == 403
    assert client.get("/", HTTP_HX_REQUEST="true")["HX-Redirect"] == "/accounts/2fa/setup/"
    # A token is no password: scripts keep working.
    assert Client().get("/api/jobs", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200

    page = client.get("/accounts/2fa/setup/")
    assert page.status_code == 200 and b"before anything else" in page.content
    device = TOTPDevice.objects.get(user=admin_user)
    assert client.post("/accounts/2fa/setup/", {"code": _code(device)}).status_code == 200
    assert client.get("/").status_code == 200
    # And they may not turn it off while it is required.
    client.post("/accounts/2fa/off/", {"code": _code(device, ahead=1)})
    assert two_factor.has_second_factor(admin_user)


def test_members_are_not_required_and_may_turn_it_off_with_a_code(member, member_client, settings):
    settings.HUB_ADMIN_2FA = True
    assert member_client.get("/").status_code == 200
    device, _ = _enrol(member)
    member_client.post("/accounts/2fa/off/", {"code": "999999" if _code(device) != "999999" else "888888"})
    assert two_factor.has_second_factor(member)
    member_client.post("/accounts/2fa/off/", {"code": _code(device, ahead=1)})
    assert not two_factor.has_second_factor(member)


def test_people_signed_in_by_the_trusted_header_are_not_asked(admin_user, settings):
    settings.HUB_ADMIN_2FA = True
    settings.HUB_TRUSTED_HEADER = "Remote-User"
    settings.HUB_TRUSTED_PROXIES = ["10.0.0.5"]
    answer = Client().get("/", REMOTE_ADDR="10.0.0.5", HTTP_REMOTE_USER=admin_user.username)
    assert answer.status_code == 200


def test_signed_out_the_pages_lead_to_sign_in(db):
    for path in ("/accounts/2fa/", "/accounts/2fa/setup/"):
        assert Client().get(path)["Location"].startswith("/accounts/login/")
    for path in ("/accounts/2fa/codes/", "/accounts/2fa/off/"):
        assert Client().post(path)["Location"].startswith("/accounts/login/")


def test_manage_py_turns_it_off_for_someone_who_lost_their_phone(member, capsys):
    _enrol(member)
    call_command("two_factor_off", member.username)
    assert not two_factor.has_second_factor(member) and "is off" in capsys.readouterr().out
    with pytest.raises(Exception, match="no person"):
        call_command("two_factor_off", "nobody")


def test_with_admin_2fa_an_admins_session_from_before_they_set_it_up_ends(admin_user, admin_client, settings):
    settings.HUB_ADMIN_2FA = True
    _enrol(admin_user)  # elsewhere, after this session was opened
    answer = admin_client.get("/devices/")
    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/?next=/devices/"
    assert "_auth_user_id" not in admin_client.session


def test_members_pages_cost_no_query_for_two_factors(member_client, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.HUB_ADMIN_2FA = True
    with CaptureQueriesContext(connection) as captured:
        assert member_client.get("/accounts/settings/").status_code == 200
    assert captured.captured_queries and not [q for q in captured.captured_queries if "otp_" in q["sql"]]
