from __future__ import annotations

from django.contrib import admin

from jobs.models import Artifact, DeviceLease, Job, JobEvent, RenderStat


class EventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    readonly_fields = ("seq", "at", "state", "message", "data")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("pk", "kind", "model_id", "owner", "device", "state", "progress", "created")
    list_filter = ("state", "kind", "device")
    search_fields = ("prompt", "model_id", "remote_id")
    inlines = [EventInline]
    readonly_fields = ("remote_id", "remote_data", "poll_ticket", "last_seq")


admin.site.register(Artifact)
admin.site.register(DeviceLease)
admin.site.register(RenderStat)
