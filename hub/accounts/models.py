from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """A person of the household or team. The role decides what they may do; see README "Roles"."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"  # devices, people, quotas, the queue
        MEMBER = "member", "Member"  # submits, watches and keeps own results
        VIEWER = "viewer", "Viewer"  # watches

    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    @property
    def is_admin(self) -> bool:
        return self.is_active and self.role == self.Role.ADMIN

    @property
    def can_submit(self) -> bool:
        return self.is_active and self.role in (self.Role.ADMIN, self.Role.MEMBER)

    def __str__(self) -> str:
        return self.get_full_name() or self.username
