"""People and the hub's client at the test provider: ``python op_seed.py REDIRECT_URI`` after migrate.

alice is in hub-admins, bob in family, carol in no group; every password is "provider-pass"."""

import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "op_settings")
django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402

for name, group in (("alice", "hub-admins"), ("bob", "family"), ("carol", None)):
    user = User.objects.create_user(name, email=f"{name}@example.test", password="provider-pass")
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
Application.objects.create(
    name="tiiny hub",
    client_id="hub-client",
    client_secret="hub-client-secret",
    client_type=Application.CLIENT_CONFIDENTIAL,
    authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
    redirect_uris=" ".join(sys.argv[1:]),
    algorithm=Application.RS256_ALGORITHM,
    skip_authorization=True,
)
