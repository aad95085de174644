from __future__ import annotations

import zoneinfo

from django import forms

from devices.capabilities import Capabilities
from devices.clients.base import validate_base_url
from devices.models import Device
from devices.services import NAME_TAKEN


def _clean_url(value: str) -> str:
    try:
        return validate_base_url(value)
    except ValueError as exc:
        raise forms.ValidationError(str(exc)) from None


class DeviceForm(forms.Form):
    """Add or edit a device. The API key field never shows the stored key (not even masked)."""

    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=Device.Kind.choices, initial=Device.Kind.TIINY)
    base_url = forms.CharField(label="URL", max_length=300, help_text="e.g. http://192.168.1.50 (port 80)")
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="The key TiinyOS shows. Leave empty to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    night_start = forms.TimeField(initial="23:00", widget=forms.TimeInput(attrs={"type": "time"}))
    night_end = forms.TimeField(initial="07:00", widget=forms.TimeInput(attrs={"type": "time"}))
    time_zone = forms.CharField(max_length=64, required=False)
    is_default = forms.BooleanField(label="Default device", required=False)
    may_evict_summary_model = forms.BooleanField(label="Renders may unload the summary model", required=False)

    def __init__(self, *args, device: Device | None = None, **kwargs):
        self.device = device
        if device is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                f: getattr(device, f)
                for f in (
                    "name",
                    "kind",
                    "base_url",
                    "night_start",
                    "night_end",
                    "time_zone",
                    "is_default",
                    "may_evict_summary_model",
                )
            }
        super().__init__(*args, **kwargs)
        if device is None:
            del self.fields["clear_api_key"]
            del self.fields["may_evict_summary_model"]  # the vault is only known once the device answered
            self.fields["api_key"].help_text = "The key TiinyOS shows (not needed for TensorSharp)."
        else:
            model = Capabilities.from_dict(device.capabilities).vault.summary_model
            self.fields["may_evict_summary_model"].help_text = (
                f"At night TiinyOS writes memory summaries with {model or 'a chat model'}; "
                "allow hub renders to unload it?"
            )

    def clean_base_url(self) -> str:
        return _clean_url(self.cleaned_data["base_url"])

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        clash = Device.objects.filter(name=name)
        if self.device is not None:
            clash = clash.exclude(pk=self.device.pk)
        if clash.exists():
            raise forms.ValidationError(NAME_TAKEN)
        return name

    def clean_time_zone(self) -> str:
        tz = self.cleaned_data.get("time_zone") or ""
        if tz and tz not in zoneinfo.available_timezones():
            raise forms.ValidationError("Unknown time zone (use a name like Europe/Paris).")
        return tz

    def service_fields(self) -> dict:
        data = dict(self.cleaned_data)
        data.pop("clear_api_key", None)
        key = data.pop("api_key", "")
        if not data.get("time_zone"):
            data.pop("time_zone")
        if self.device is None:
            data["api_key"] = key
        elif self.cleaned_data.get("clear_api_key"):
            data["api_key"] = ""
        elif key:
            data["api_key"] = key
        return data


class ConnectionTestForm(forms.Form):
    kind = forms.ChoiceField(choices=Device.Kind.choices)
    base_url = forms.CharField(max_length=300)
    api_key = forms.CharField(required=False)

    def clean_base_url(self) -> str:
        return _clean_url(self.cleaned_data["base_url"])
