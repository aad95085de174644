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
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings

from hub.links import link_origin
from notify import targets, vapid

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

    if mail_domain_blocked(address):
        raise SendError(targets.BLOCKED, permanent=True)
    text = f"{message.body}\n\n{message.url}\n\n— Tiiny Hub (change what you get at {_settings_url()})\n"
    try:
        send_mail(message.title, text, None, [address], fail_silently=False)
    except (OSError, ConnectionError) as exc:
        raise SendError(f"the mail server did not take it ({exc.__class__.__name__})") from None
    except Exception as exc:  # noqa: BLE001 - smtplib's many errors: a reason, then maybe a retry
        raise SendError(f"sending the mail failed ({exc.__class__.__name__})") from None


def mail_domain_blocked(address: str) -> bool:
    """True for an address whose domain is a private address literal (``x@[127.0.0.1]``, ``x@[IPv6:::1]``):
    the mail server is the admin's and trusted, but it would carry the message to wherever the literal says.
    A name is left to the mail server (it looks up MX records, not the A records a check here would see)."""
    domain = address.rpartition("@")[2].strip().strip("[]")
    domain = domain[5:] if domain.lower().startswith("ipv6:") else domain
    ip = targets.literal(domain)
    return ip is not None and not targets.is_public(ip) and not targets.is_allowed_host(domain, 25)


# -- Apprise ---------------------------------------------------------------------------------------------------
#: Apprise services whose host the URL names (self-hosted ones): the host is checked when the channel is added.
APPRISE_OWN_HOST = frozenset(
    {"ntfy", "ntfys", "gotify", "gotifys", "json", "jsons", "xml", "xmls", "form", "forms", "apprise", "apprises",
     "matrix", "matrixs", "mmost", "mmosts", "rocket", "rockets"}
)  # fmt: skip
#: Apprise services that reach their own public API whatever the URL holds (its "host" is a token or an id).
APPRISE_PUBLIC_API = frozenset({"tgram", "discord", "slack", "pover"})
APPRISE_REFUSED = (
    "The hub sends through Apprise only to services whose target it can check: ntfy, Gotify, Matrix, "
    "Mattermost, Rocket.Chat, Apprise API, JSON/XML/form, Telegram, Discord, Slack and Pushover. For mail, add "
    "an email channel."
)


@dataclass(frozen=True)
class AppriseTarget:
    service: str  # "Telegram", "ntfy", …
    scheme: str
    host: str | None  # the host it will reach; None: the service's public API
    port: int
    several: bool = False  # Apprise reads several URLs in one string ("json://a json://b", "a,b")

    @property
    def checkable(self) -> bool:
        """Only these are sent: the others do not speak HTTP through requests, where the check is made."""
        return not self.several and (self.scheme in APPRISE_OWN_HOST or self.scheme in APPRISE_PUBLIC_API)


def _apprise_box(url: str) -> Any:
    """An Apprise holding what ``url`` names. It sends in the calling thread (async_mode off): the guard over
    its connections belongs to this thread's context, and a thread pool would not carry it."""
    import apprise  # heavy: only Apprise channels need it

    box = apprise.Apprise(asset=apprise.AppriseAsset(async_mode=False))
    try:
        box.add(url)
    except Exception:  # noqa: BLE001 - a URL Apprise can't parse is simply not one
        pass
    return box


def _target_in(box: Any, url: str) -> AppriseTarget | None:
    if len(box) == 0:
        return None
    if len(box) > 1:
        return AppriseTarget(service="several services", scheme="", host=None, port=0, several=True)
    plugin = box[0]
    scheme = url.strip().partition("://")[0].lower()
    secure = bool(getattr(plugin, "secure", False))
    own = scheme in APPRISE_OWN_HOST and getattr(plugin, "mode", None) != "cloud"  # ntfy://topic is ntfy.sh
    return AppriseTarget(
        service=str(plugin.service_name),
        scheme=scheme,
        host=str(plugin.host) if own and getattr(plugin, "host", None) else None,
        port=int(getattr(plugin, "port", None) or (443 if secure else 80)),
    )


def apprise_target(url: str) -> AppriseTarget | None:
    """What an Apprise URL names: its service and the host it will reach; None when Apprise does not know it."""
    return _target_in(_apprise_box(url), url)


def send_apprise(url: str, message: Message) -> None:
    """One Apprise URL (ntfy://, gotifys://, tgram://, discord://, matrix://, pover://, json://, …), its
    connections checked (``notify.targets.guarded``).

    Apprise's own log lines (which may name the URL or repeat what the far end answered) never reach the hub's
    log nor the reason (settings: the "apprise" logger does not propagate); the reason says what kind of failure
    it was, from what the guard saw.
    """
    box = _apprise_box(url)
    target = _target_in(box, url)
    if target is None:
        raise SendError("Apprise does not understand this URL", permanent=True)
    if not target.checkable:  # the same box is sent: what was checked is what goes out
        raise SendError("blocked: a kind of Apprise URL the hub does not send to", permanent=True)
    with targets.guarded() as guard:
        ok = box.notify(title=message.title, body=f"{message.body}\n{message.url}")
    if not ok:
        raise _guard_failure(guard) or SendError("refused: the service did not take it")


def _guard_failure(guard: targets.Guard) -> SendError | None:
    """The reason a guarded send failed, when the guard saw it fail before any answer."""
    if guard.blocked:
        return SendError(targets.BLOCKED, permanent=True)
    if guard.unresolved:
        return SendError("could not connect: the name does not resolve")
    if guard.timed_out:
        return SendError("no answer in time")
    if guard.unreachable:
        return SendError("could not connect")
    return None


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


def _checked_transport() -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(trust_env=False)
    # httpx takes no network backend, its pool (httpcore) does: the same pool, its connections made to the
    # addresses the check allowed.
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        network_backend=targets.CheckedBackend(targets.allowed_hosts()),
    )
    return transport


def send_webhook(url: str, secret: str, message: Message) -> None:
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
            transport=_checked_transport(),
            timeout=settings.NOTIFY_TIMEOUT_S,
            follow_redirects=False,
            trust_env=False,
        ) as client:
            response = client.post(url, content=body, headers=headers)
    except targets.Blocked:
        raise SendError(targets.BLOCKED, permanent=True) from None
    except httpx.InvalidURL:  # e.g. a host httpx reads as a malformed IPv4 address (0177.0.0.1)
        raise SendError("blocked: not a URL the hub can call", permanent=True) from None
    except httpx.TimeoutException:
        raise SendError("no answer in time") from None
    except httpx.ConnectError:
        raise SendError("could not connect") from None
    except httpx.HTTPError:  # it connected, and what answered did not speak HTTP
        raise SendError("no usable answer") from None
    status = response.status_code
    if 300 <= status < 400:  # redirects are not followed (the body is signed for this URL): fix the URL
        raise SendError(f"refused: HTTP {status}, a redirect (not followed)", permanent=True)
    if status >= 400:
        # 4xx means "this request is wrong" (a moved URL, a refused signature): trying again won't help, except
        # for the two that say "later" (408, 429).
        permanent = status < 500 and status not in (408, 429)
        raise SendError(f"refused: HTTP {status}", permanent=permanent)


# -- Web Push ------------------------------------------------------------------------------------------------------
def webpush_refusal(endpoint: str) -> str | None:
    """Why the hub won't post to a push ``endpoint`` (None when it will): https only, unless an admin allowed
    its host (a push service on the LAN)."""
    parts = urlsplit(endpoint)
    if not parts.hostname:
        return "blocked: not a URL"
    if parts.scheme != "https" and not targets.is_allowed_host(parts.hostname, parts.port or 80):
        return "blocked: not https"
    return None


def send_webpush(subscription: dict[str, Any], message: Message) -> None:
    import requests
    from pywebpush import WebPushException, webpush  # heavy, and only a browser channel needs it

    refusal = webpush_refusal(str(subscription.get("endpoint", "")))
    if refusal:
        raise SendError(refusal, permanent=True)
    payload = json.dumps(
        {"title": message.title, "body": message.body, "url": message.path, "tag": message.tag}
    )
    with targets.guarded() as guard:
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
                raise SendError(
                    f"the browser's subscription is gone (HTTP {status})", permanent=True
                ) from None
            raise SendError(f"refused: HTTP {status}" if status else "refused by the push service") from None
        except requests.Timeout:
            raise SendError("no answer in time") from None
        except Exception:  # noqa: BLE001 - requests' connection errors and friends
            raise _guard_failure(guard) or SendError("could not connect") from None


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
    """Where a notification's links lead: the one rule for the hub's own address (``hub.links``; no request here,
    so ``HUB_PUBLIC_URL``, else the address the hub serves on, https when it is served so)."""
    return link_origin()
