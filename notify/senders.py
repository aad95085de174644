"""The four ways out: email, Apprise, webhook, Web Push. Each takes a channel's unsealed settings and a message
and either returns or raises :class:`SendError` with a reason a person can read (never a secret) and whether
trying again could help.

These are the only code that talks to the outside for notifications; ``notify.services`` records the outcome.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from notify import vapid

logger = logging.getLogger("notify")

SIGNATURE_HEADER = "X-Hub-Signature-256"
TIMESTAMP_HEADER = "X-Hub-Timestamp"
EVENT_HEADER = "X-Hub-Event"
DELIVERY_HEADER = "X-Hub-Delivery"


class SendError(Exception):
    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


@dataclass
class Message:
    event: str
    title: str
    body: str
    path: str  # e.g. /jobs/42/ — the page the notification opens
    url: str  # the same, absolute
    tag: str  # a browser replaces an earlier notification with the same tag
    data: dict[str, Any] = field(default_factory=dict)  # the webhook's JSON body beyond the above
    delivery_id: int = 0
    attempt: int = 1


# -- email --------------------------------------------------------------------------------------------------
def send_email(address: str, message: Message) -> None:
    from django.core.mail import send_mail

    text = f"{message.body}\n\n{message.url}\n\n— Tiiny Hub (change what you get at {_settings_url()})\n"
    try:
        send_mail(message.title, text, None, [address], fail_silently=False)
    except (OSError, ConnectionError) as exc:
        raise SendError(f"the mail server did not take it ({exc.__class__.__name__})") from None
    except Exception as exc:  # noqa: BLE001 - smtplib's many errors: a reason, then maybe a retry
        raise SendError(f"sending the mail failed ({exc.__class__.__name__})") from None


# -- Apprise ---------------------------------------------------------------------------------------------------
class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(record.getMessage())
        except Exception:  # noqa: BLE001
            self.lines.append(str(record.msg))


def apprise_service(url: str) -> str | None:
    """The service an Apprise URL names ("Telegram", "ntfy", …), or None when Apprise does not know it."""
    import apprise

    try:
        plugin = apprise.Apprise.instantiate(url)
    except Exception:  # noqa: BLE001 - a URL Apprise can't parse is simply not one
        return None
    return str(plugin.service_name) if plugin else None


def send_apprise(url: str, message: Message) -> None:
    """One Apprise URL (ntfy://, gotifys://, tgram://, discord://, matrix://, pover://, mailto://, json://, …).

    Apprise's own log lines (which may name the URL) never reach the hub's log (settings: the "apprise" logger
    does not propagate); its warnings become the reason, with the URL's parts taken out.
    """
    import apprise

    handler = _Collect()
    log = logging.getLogger("apprise")
    log.addHandler(handler)
    try:
        asset = apprise.AppriseAsset(async_mode=False)
        box = apprise.Apprise(asset=asset)
        if not box.add(url):
            raise SendError("Apprise does not understand this URL", permanent=True)
        ok = box.notify(title=message.title, body=f"{message.body}\n{message.url}")
    finally:
        log.removeHandler(handler)
    if not ok:
        said = "; ".join(dict.fromkeys(handler.lines))[-300:]
        raise SendError(redact(f"the service refused it{': ' + said if said else ''}", url))


# -- webhook -------------------------------------------------------------------------------------------------------
def sign(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over ``timestamp + "." + body``, hex: what ``X-Hub-Signature-256: sha256=…`` carries."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def webhook_body(message: Message) -> bytes:
    payload = {
        "event": message.event,
        "title": message.title,
        "body": message.body,
        "url": message.url,
        "delivery": message.delivery_id,
        "attempt": message.attempt,
        **message.data,
    }
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def send_webhook(url: str, secret: str, message: Message) -> None:
    import httpx

    body = webhook_body(message)
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "TiinyHub-Webhook/1",
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: sign(secret, timestamp, body),
        EVENT_HEADER: message.event,
        DELIVERY_HEADER: str(message.delivery_id),
    }
    try:
        with httpx.Client(
            timeout=settings.NOTIFY_TIMEOUT_S, follow_redirects=False, trust_env=False
        ) as client:
            response = client.post(url, content=body, headers=headers)
    except httpx.TimeoutException:
        raise SendError("no answer in time") from None
    except httpx.HTTPError as exc:
        raise SendError(f"could not reach it ({exc.__class__.__name__})") from None
    status = response.status_code
    if 300 <= status < 400:  # redirects are not followed (the body is signed for this URL): fix the URL
        raise SendError(f"it answered HTTP {status}, a redirect (not followed)", permanent=True)
    if status >= 400:
        # 4xx means "this request is wrong" (a moved URL, a refused signature): trying again won't help, except
        # for the two that say "later" (408, 429).
        permanent = status < 500 and status not in (408, 429)
        raise SendError(f"it answered HTTP {status}", permanent=permanent)


# -- Web Push ------------------------------------------------------------------------------------------------------
def send_webpush(subscription: dict[str, Any], message: Message) -> None:
    from pywebpush import WebPushException, webpush  # heavy, and only a browser channel needs it

    payload = json.dumps(
        {"title": message.title, "body": message.body, "url": message.path, "tag": message.tag}
    )
    try:
        webpush(
            subscription_info=subscription,
            data=payload,
            vapid_private_key=vapid.private_key(),
            vapid_claims={"sub": settings.NOTIFY_VAPID_SUBJECT},
            timeout=settings.NOTIFY_TIMEOUT_S,
            ttl=24 * 3600,
        )
    except WebPushException as exc:
        status = getattr(exc.response, "status_code", None)
        if status in (404, 410):  # the browser unsubscribed or the subscription expired
            raise SendError(f"the browser's subscription is gone (HTTP {status})", permanent=True) from None
        raise SendError(
            f"the push service refused it (HTTP {status})" if status else "the push service refused it"
        ) from None
    except Exception as exc:  # noqa: BLE001 - requests' connection errors and friends
        raise SendError(f"could not reach the push service ({exc.__class__.__name__})") from None


# -- helpers ---------------------------------------------------------------------------------------------------
def redact(text: str, *secrets: str) -> str:
    """``text`` without any secret, nor any longer piece of one (a URL's token, password or path segment)."""
    import re

    pieces: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        pieces.add(secret)
        pieces.update(p for p in re.split(r"[/?&=:@#;,.]+", secret) if len(p) >= 6)
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "…")
    return text


def _settings_url() -> str:
    return f"{base_url()}/notify/"


def base_url() -> str:
    if settings.HUB_PUBLIC_URL:
        return settings.HUB_PUBLIC_URL
    host = settings.HUB_HOST if settings.HUB_HOST not in ("0.0.0.0", "::", "[::]") else "127.0.0.1"
    return f"http://{host}:{settings.HUB_PORT}"
