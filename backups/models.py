"""One row per backup the hub took: when, whether it worked, how big, what it copied and what it shared.

The health page and ``/metrics`` read the newest finished row. A row with no ``finished`` is a backup at work
(or one whose process died: the next run marks it failed, see ``backups.services``).
"""

from __future__ import annotations

from django.db import models


class BackupRun(models.Model):
    class Trigger(models.TextChoices):
        MANUAL = "manual", "By hand (manage.py backup)"
        NIGHTLY = "nightly", "Daily, by beat"
        UPGRADE = "upgrade", "Before migrating (make up)"

    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    directory = models.CharField(max_length=500)  # the DIR backups go into
    name = models.CharField(max_length=100, blank=True, default="")  # the dated folder under it
    started = models.DateTimeField()
    finished = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(null=True)  # None while at work
    size_bytes = models.BigIntegerField(default=0)  # everything the backup holds (database and files)
    files = models.PositiveIntegerField(default=0)
    copied = models.PositiveIntegerField(default=0)  # files written anew
    linked = models.PositiveIntegerField(default=0)  # files shared with the previous backup (hard links)
    copied_bytes = models.BigIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["-started", "-id"]
        indexes = [models.Index(fields=["-finished"], name="backups_run_finished_idx")]

    def __str__(self) -> str:
        state = "at work" if self.ok is None else ("ok" if self.ok else "failed")
        return f"backup {self.name or self.pk} ({state})"
