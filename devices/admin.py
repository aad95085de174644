"""Admin for devices: the key is write-only (a password field that never renders a value)."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from devices.clients.base import validate_base_url
from devices.models import Device, DeviceMetric
from devices.services import device_remove
from hub.accounts import audit


class DeviceAdminForm(forms.ModelForm):
    new_api_key = forms.CharField(
        label="API key",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Leave empty to keep the stored key. The stored key is never shown.",
    )

    class Meta:
        model = Device
        fields = [
            "name",
            "kind",
            "base_url",
            "night_start",
            "night_end",
            "time_zone",
            "may_evict_summary_model",
            "queue_paused",
            "is_default",
        ]

    def clean_base_url(self) -> str:
        try:
            return validate_base_url(self.cleaned_data["base_url"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def save(self, commit: bool = True) -> Device:
        device = super().save(commit=False)
        if self.cleaned_data.get("new_api_key"):
            device.api_key = self.cleaned_data["new_api_key"]
        if commit:
            device.save()
        return device


#: What the hub learns about a device by itself: shown, never edited.
STATUS_FIELDS = (
    "state", "state_message", "state_fix", "last_seen", "versions", "capabilities_at", "reading_at",
    "hub_loaded_models", "created", "updated",
)  # fmt: skip


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    form = DeviceAdminForm
    list_display = ["name", "kind", "state", "last_seen", "queue_paused", "is_default"]

    # The admin site's writes go to the audit log like the Devices pages' (devices.services records them).
    def save_model(self, request, obj: Device, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        action = audit.Action.DEVICE_CHANGED if change else audit.Action.DEVICE_ADDED
        fields = sorted(f for f in form.changed_data if f != "new_api_key")
        audit.record(action, actor=request.user, target=obj, request=request,
                     data={"fields": fields, "credentials_changed": "new_api_key" in form.changed_data})  # fmt: skip

    def delete_model(self, request, obj: Device) -> None:
        device_remove(device=obj, by=request.user)

    def delete_queryset(self, request, queryset) -> None:
        for device in queryset:
            device_remove(device=device, by=request.user)

    list_filter = ["kind", "state"]
    search_fields = ["name"]
    readonly_fields = ["key_status", *STATUS_FIELDS]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "name",
                    "kind",
                    "base_url",
                    "new_api_key",
                    "key_status",
                    "is_default",
                    "queue_paused",
                ]
            },
        ),
        ("Night window", {"fields": ["night_start", "night_end", "time_zone", "may_evict_summary_model"]}),
        ("Status (read only)", {"fields": list(STATUS_FIELDS)}),
    ]

    @admin.display(description="Stored API key")
    def key_status(self, obj: Device) -> str:
        return "set" if obj.has_api_key else "not set"


@admin.register(DeviceMetric)
class DeviceMetricAdmin(admin.ModelAdmin):
    list_display = ["device", "resolution", "bucket", "samples"]
    list_filter = ["resolution"]
    readonly_fields = [
        "device",
        "resolution",
        "bucket",
        "samples",
        "npu_util_sum",
        "npu_mem_sum",
        "cpu_sum",
        "mem_sum",
    ]

    def has_add_permission(self, request) -> bool:
        # Every field is read-only (the poller writes the buckets): an add form would save an empty row,
        # which the NOT NULL columns refuse with a 500.
        return False
