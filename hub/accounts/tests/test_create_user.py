from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from hub.accounts.models import User

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_prints_a_generated_password_once():
    first = run("create_user", "kim", "--role", "member")
    assert "created kim (member)" in first
    password = first.split("password: ")[1].split()[0]
    assert User.objects.get(username="kim").check_password(password)
    second = run("create_user", "kim", "--role", "viewer")
    assert "updated kim (viewer)" in second
    assert "password" not in second
    user = User.objects.get(username="kim")
    assert user.role == "viewer" and user.check_password(password)


def test_it_makes_admins_staff_and_takes_a_password():
    run("create_user", "root", "--role", "admin", "--password", "pw-1234567890")
    user = User.objects.get(username="root")
    assert user.is_admin and user.is_staff and user.is_superuser and user.check_password("pw-1234567890")
    run("create_user", "root", "--role", "member")
    user.refresh_from_db()
    assert not user.is_staff and not user.is_admin and user.can_submit


def test_it_refuses_an_unknown_role():
    with pytest.raises(CommandError):
        call_command("create_user", "x", "--role", "owner")


def test_it_creates_the_first_admin_only_once():
    first = run("ensure_admin")
    assert first.startswith("first admin: admin / ")
    assert run("ensure_admin").startswith("an admin already exists")


def test_it_knows_what_each_role_may_do(admin_user, member, viewer):
    assert admin_user.is_admin and admin_user.can_submit
    assert not member.is_admin and member.can_submit
    assert not viewer.is_admin and not viewer.can_submit
