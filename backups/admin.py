from __future__ import annotations

from django.contrib import admin

from backups.models import BackupRun


@admin.register(BackupRun)
class BackupRunAdmin(admin.ModelAdmin):
    """The record of every backup, read-only: backups are taken by ``manage.py backup`` and beat, never here."""

    list_display = ("started", "name", "trigger", "ok", "size_bytes", "files", "copied", "linked", "error")
    list_filter = ("ok", "trigger")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
