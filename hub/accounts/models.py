from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone


class User(AbstractUser):
    """A person of the household or team. The role decides what they may do; see README "Roles"."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"  # devices, people, quotas, the queue
        MEMBER = "member", "Member"  # submits, watches and keeps own results
        VIEWER = "viewer", "Viewer"  # watches

    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    # Personal settings (the settings page): how the hub names them, and the zone their times are shown in
    # ("" = the hub's own, HUB_TIME_ZONE; hub.accounts.middleware activates it for each request).
    display_name = models.CharField(max_length=150, blank=True)
    time_zone = models.CharField(max_length=64, blank=True)
    # Set when an admin hands out a one-time password; every page leads to the password page until the
    # person has chosen their own (hub.accounts.middleware.MustChangePasswordMiddleware).
    must_change_password = models.BooleanField(default=False)

    @property
    def is_admin(self) -> bool:
        return self.is_active and self.role == self.Role.ADMIN

    @property
    def can_submit(self) -> bool:
        return self.is_active and self.role in (self.Role.ADMIN, self.Role.MEMBER)

    def __str__(self) -> str:
        # The one place the hub names a person: templates print ``{{ user }}`` / ``{{ job.owner }}``.
        return self.display_name or self.get_full_name() or self.username


class ApiToken(models.Model):
    """A personal API token for scripts: the REST API (/api/) and the OpenAI-compatible routes (/v1/).

    Only a SHA-256 of the token is stored. A plain, unsalted, fast hash is enough here (unlike
    passwords): the token carries 256 random bits, so neither a dictionary nor a brute-force attack
    on a leaked hash is feasible, and a fast hash lets every request find its row by an indexed
    lookup. See ``hub.accounts.tokens`` for the rules.
    """

    class Scope(models.TextChoices):
        READ = "read", "Read"  # look at jobs, devices and results the owner may see
        SUBMIT = "submit", "Submit"  # also queue jobs (members and admins only)

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=8, db_index=True)  # first 8 chars of the secret; safe to show
    key_hash = models.CharField(max_length=64, unique=True)  # sha256 hex of the whole token
    scopes = models.CharField(max_length=50, default=Scope.READ)  # comma-separated Scope values
    created = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_ip = models.GenericIPAddressField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # None: never expires. Past it the token answers 401 "expired" (``hub.accounts.tokens``).
    expires_at = models.DateTimeField(null=True, blank=True)
    # The ids of the devices its jobs may run on; empty: any the person may use. Ids, not a link: accounts sits
    # below devices (pyproject's layers), and a removed device simply leaves the token fewer (or no) devices.
    device_ids = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} (thub_{self.prefix}…)"

    @property
    def scope_list(self) -> list[str]:
        return [s for s in self.scopes.split(",") if s]

    def has_scope(self, scope: str) -> bool:
        return scope in self.scope_list

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


def _invitation_expiry() -> dt.datetime:
    return timezone.now() + dt.timedelta(days=7)


class Invitation(models.Model):
    """A single-use link that lets someone pick a username and password and join with ``role``.

    Only a SHA-256 of the link's secret is stored (like ``ApiToken``: 256 random bits need no slow hash).
    The rules live in ``hub.accounts.invitations``.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        USED = "used", "Used"
        EXPIRED = "expired", "Expired"
        REVOKED = "revoked", "Revoked"

    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8)  # the start of the secret: tells links apart in a list
    role = models.CharField(max_length=10, choices=User.Role.choices, default=User.Role.MEMBER)
    note = models.CharField(max_length=100, blank=True)  # who it is for, for the admins' list
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="invitations_sent"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(default=_invitation_expiry)
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.OneToOneField(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="invitation"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"invitation {self.prefix}… ({self.role}, {self.status})"

    @property
    def status(self) -> str:
        if self.used_at is not None:
            return self.Status.USED
        if self.revoked_at is not None:
            return self.Status.REVOKED
        if self.expires_at <= timezone.now():
            return self.Status.EXPIRED
        return self.Status.PENDING

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING


class AuditEntry(models.Model):
    """One admin action or security event, kept ``HUB_AUDIT_DAYS``: who did what to what, when, and from where.

    Written only through ``hub.accounts.audit.record`` (the one function every app calls). The names are copied beside the
    links: the entry outlives the account or thing it names, and says what they were called then. ``data`` is a
    short JSON detail and never holds a secret (no key, token, password or link secret): ``hub.accounts.audit`` drops them.
    """

    class Action(models.TextChoices):
        PERSON_CREATED = "person-created", "Person added"
        PERSON_ROLE = "person-role", "Role changed"
        PERSON_DEACTIVATED = "person-deactivated", "Person deactivated"
        PERSON_REACTIVATED = "person-reactivated", "Person brought back"
        PERSON_PASSWORD = "person-password", "One-time password given"
        SIGNIN_FAILED = "signin-failed", "Sign-in failed"
        SIGNIN_LOCKOUT = "signin-lockout", "Sign-in locked out"
        SIGNIN_UNLOCK = "signin-unlock", "Sign-in unlocked"
        QUOTA_CHANGED = "quota-changed", "Quota changed"
        DEVICE_ADDED = "device-added", "Device added"
        DEVICE_CHANGED = "device-changed", "Device changed"
        DEVICE_REMOVED = "device-removed", "Device removed"
        TOKEN_CREATED = "token-created", "Token created"
        TOKEN_REVOKED = "token-revoked", "Token revoked"
        BACKUP_MADE = "backup-made", "Backup made"
        BACKUP_RESTORED = "backup-restored", "Backup restored"
        SHARE_CREATED = "share-created", "Share link made"
        GROUP_SAVED = "group-saved", "Group made or changed"
        GROUP_DELETED = "group-deleted", "Group deleted"
        GROUP_MEMBER_ADDED = "group-member-added", "Put in a group"
        GROUP_MEMBER_REMOVED = "group-member-removed", "Taken out of a group"
        SIGNIN_SSO = "signin-sso", "Signed in through the identity provider"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=32, choices=Action.choices, db_index=True)
    actor = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(
        max_length=150
    )  # "" for the hub itself (a beat task, a command with no one)
    ip = models.GenericIPAddressField(
        null=True, blank=True
    )  # where the request came from; None off a request
    # What it was done to: a person (``target``, linked) or a thing named by kind and id ("device", ref "7").
    target = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    target_kind = models.CharField(max_length=20, blank=True)
    target_ref = models.CharField(max_length=64, blank=True)
    target_name = models.CharField(max_length=150)
    detail = models.CharField(max_length=200, blank=True)  # one line for people
    data = models.JSONField(default=dict, blank=True)  # the short structured detail, for the API

    class Meta:
        ordering = ["-at", "-pk"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name}: {self.get_action_display()} {self.target_name}"


class UserGroup(models.Model):
    """A group of people ("kids", "guests", "studio") an admin limits together (``hub.accounts.groups``).

    The lists limit what its members may use; an empty list limits nothing. Models are the devices' model ids
    (a model matches an id, or the same name after the publisher: ``groups.same_model``), kinds the job kinds'
    values, devices their ids (a renamed device stays in the list). The hub's base knows no device, so the ids are
    plain values here; the jobs app checks them against what the devices report when an admin sets them.

    Quotas: per-person defaults (each member's own limit, the stricter of it and their own settings) and a shared
    limit (the members' device minutes together). NULL: no limit from this group.
    """

    name = models.CharField(max_length=50, unique=True)
    members = models.ManyToManyField(User, blank=True, related_name="usage_groups")
    model_ids = models.JSONField(default=list, blank=True)
    kinds = models.JSONField(default=list, blank=True)
    devices = models.JSONField(default=list, blank=True)
    device_minutes_per_day = models.PositiveIntegerField(null=True, blank=True)
    device_minutes_per_week = models.PositiveIntegerField(null=True, blank=True)
    max_queued = models.PositiveIntegerField(null=True, blank=True)
    storage_mb = models.PositiveIntegerField(null=True, blank=True)
    shared_minutes_per_day = models.PositiveIntegerField(null=True, blank=True)
    shared_minutes_per_week = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
