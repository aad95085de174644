"""Forms for the notification pages: doors to ``notify.services`` (which validates URLs and seals secrets)."""

from __future__ import annotations

from django import forms

from notify.models import Channel

KINDS = [
    (k, label) for k, label in Channel.Kind.choices if k != Channel.Kind.BROWSER
]  # browsers subscribe by JS


class ChannelForm(forms.Form):
    """Add (``kind`` given) or edit a channel. On edit an empty URL or secret keeps the stored one."""

    kind = forms.ChoiceField(
        choices=KINDS,
        label="Kind",
        initial=Channel.Kind.APPRISE,
        error_messages={
            "invalid_choice": "Not a kind of channel: choose email, apprise or webhook (Web Push is turned on "
            "from the Notifications page, in the browser that should receive it)."
        },
    )
    name = forms.CharField(
        max_length=100, required=False, label="Name", help_text="So you can tell them apart."
    )
    address = forms.EmailField(
        required=False,
        label="Email address",
        max_length=254,
        help_text="A link to confirm it is mailed there: the channel sends nothing until it is opened.",
    )
    url = forms.CharField(
        required=False,
        max_length=2000,
        label="URL",
        strip=True,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false", "inputmode": "url"}),
        help_text="Apprise: one URL, e.g. ntfy://my-topic, gotify://host/token, tgram://bot_token/chat_id, "
        "discord://webhook_id/webhook_token, matrix://user:pass@host/#room, pover://user@token. Webhook: the "
        "http(s) address that receives the JSON. A host on the private network needs an admin's allowing.",
    )
    secret = forms.CharField(
        required=False,
        max_length=200,
        label="Signing secret (webhook)",
        strip=True,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Leave empty to have one made. The receiver checks X-Hub-Signature-256 with it.",
    )
    enabled = forms.BooleanField(required=False, initial=True, label="On")
    on_done = forms.BooleanField(required=False, initial=True, label="When my job finishes")
    on_failed = forms.BooleanField(required=False, initial=True, label="When my job fails")
    on_started = forms.BooleanField(required=False, initial=False, label="When my job starts")
    on_queue_empty = forms.BooleanField(required=False, label="When the queue runs empty")
    on_device_locked = forms.BooleanField(required=False, label="When a device is locked")
    on_backup_failed = forms.BooleanField(required=False, initial=True, label="When the daily backup fails")
    on_disk_full = forms.BooleanField(
        required=False, initial=True, label="When the hub's disk is full (a result waits for space)"
    )

    def __init__(
        self,
        *args,
        channel: Channel | None = None,
        household: bool = False,
        kinds: tuple[str, ...] | None = None,
        own_address: str = "",
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.channel = channel
        self.household = household
        if kinds is not None:
            self._offer_only(kinds, own_address)
        if household:
            del self.fields["on_done"], self.fields["on_failed"], self.fields["on_started"]
        else:
            del (
                self.fields["on_queue_empty"],
                self.fields["on_device_locked"],
                self.fields["on_backup_failed"],
                self.fields["on_disk_full"],
            )
        if channel is not None:
            del self.fields["kind"]
            self.fields["url"].help_text = "Leave empty to keep the stored one (it is not shown again)."
            self.fields["url"].widget.attrs["placeholder"] = channel.display
            self.fields["secret"].help_text = "Leave empty to keep the stored one."
            for name in ("name", "address", "enabled", *self.event_fields):
                self.fields[name].initial = getattr(channel, name)

    def _offer_only(self, kinds: tuple[str, ...], own_address: str) -> None:
        """The page offers only what this person may add (``notify.selectors.channel_kinds_for``); the service
        refuses the rest whatever a request sends."""
        self.fields["kind"].choices = [(k, label) for k, label in KINDS if k in kinds]
        if Channel.Kind.APPRISE not in kinds:  # a viewer: their own address, by email
            del self.fields["url"], self.fields["secret"]
            self.fields["kind"].initial = Channel.Kind.EMAIL
            self.fields["address"].initial = own_address
            self.fields[
                "address"
            ].help_text = (
                "Viewers: your own address, as on the Settings page. A link to confirm it is mailed there."
            )

    @property
    def event_fields(self) -> list[str]:
        return [
            f
            for f in (
                "on_done",
                "on_failed",
                "on_started",
                "on_queue_empty",
                "on_device_locked",
                "on_backup_failed",
                "on_disk_full",
            )
            if f in self.fields
        ]

    @property
    def chosen_kind(self) -> str:
        return self.channel.kind if self.channel else self.cleaned_data.get("kind", "")

    def clean(self) -> dict:
        data = super().clean()
        kind = self.chosen_kind
        # (not when the field has its own error already: a bad address is not a missing one)
        if (
            kind == Channel.Kind.EMAIL
            and not data.get("address")
            and not self.channel
            and "address" not in self.errors
        ):
            self.add_error("address", "Enter the address to write to.")
        if (
            kind in (Channel.Kind.APPRISE, Channel.Kind.WEBHOOK)
            and not data.get("url")
            and not self.channel
            and "url" not in self.errors
        ):
            self.add_error("url", "Enter the URL.")
        return data

    def event_values(self) -> dict[str, bool]:
        return {f: bool(self.cleaned_data.get(f)) for f in self.event_fields}

    def channel_values(self) -> dict:
        """What ``services.channel_add`` and ``channel_update`` take from a valid form, for every door (the
        pages and /api/notify): the name, where it goes, and the events. (``enabled`` is the caller's: the
        page's add form has no such box, and a channel starts on.)"""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "address": data["address"],
            "url": data.get("url", ""),
            "secret": data.get("secret", ""),
            **self.event_values(),
        }


class PrivateHostForm(forms.Form):
    host = forms.CharField(
        max_length=260,
        label="Host",
        strip=True,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text="A name or an address, with a port to allow only that one: ha.lan:8123, 192.168.1.20.",
    )
