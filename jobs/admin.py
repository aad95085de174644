from __future__ import annotations

from django.contrib import admin

from jobs.models import Artifact, DeviceLease, Job, JobEvent, JobLink, RenderStat


class EventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    readonly_fields = ("seq", "at", "state", "message", "data")


class ParentLinkInline(admin.TabularInline):
    """The results this job takes as inputs (a chain, ``jobs.queue.chains``): shown, changed only by the queue."""

    model = JobLink
    fk_name = "child"
    extra = 0
    can_delete = False
    readonly_fields = ("parent", "parent_number", "field", "artifact", "used", "released_at")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("pk", "kind", "model_id", "owner", "device", "state", "progress", "created")
    list_filter = ("state", "kind", "device")
    search_fields = ("prompt", "model_id", "remote_id")
    inlines = [ParentLinkInline, EventInline]
    readonly_fields = ("remote_id", "remote_data", "poll_ticket", "last_seq")


admin.site.register(Artifact)
admin.site.register(DeviceLease)
admin.site.register(RenderStat)
