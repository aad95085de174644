"""Find Tiinys on the LAN: UDP ``GADGET_DISCOVER_V1`` to 39217, then ``GET :39218/device.json`` per answer.

The UDP reply already carries the whole device.json (field notes §2.1), but the HTTP read is what the
reference documents and it proves the metadata port answers, so both are used: the HTTP copy wins.
Nothing here needs the API key; an admin gives it when adding a device.

Targets come from ``settings.HUB_DISCOVERY_TARGETS`` (default: the LAN broadcast address); tests use loopback.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings

logger = logging.getLogger("devices.discovery")

TOKEN = b"GADGET_DISCOVER_V1"
UDP_PORT = 39217
HTTP_PORT = 39218
WINDOW_S = 0.8  # the device's own ResponseWindowMillis


@dataclass
class Found:
    name: str
    serial: str
    device_id: str
    answered_from: str
    url: str  # the API base URL to suggest (the address that answered, on the backend port)
    wifi: list[str] = field(default_factory=list)
    usb: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


def _targets() -> list[tuple[str, int]]:
    raw = getattr(settings, "HUB_DISCOVERY_TARGETS", None) or [f"255.255.255.255:{UDP_PORT}"]
    out = []
    for item in raw:
        host, _, port = str(item).rpartition(":") if ":" in str(item) else (str(item), "", str(UDP_PORT))
        out.append((host, int(port or UDP_PORT)))
    return out


def _api_url(info: dict[str, Any], address: str) -> str:
    backend = info.get("backend") or {}
    scheme = backend.get("scheme") or "http"
    port = int(backend.get("port") or 0)
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{address}" + (f":{port}" if port and port != default else "")


def _parse(info: dict[str, Any], address: str) -> Found:
    addresses = info.get("ipv4_addresses") or []
    usb = (info.get("usb") or {}).get("device_ip") or ""
    wifi = [
        a.get("address")
        for a in addresses
        if a.get("address") and not str(a.get("interface", "")).startswith("usb")
    ]
    return Found(
        name=str(info.get("device_name") or info.get("hostname") or "Tiiny"),
        serial=str(info.get("serial_number") or ""),
        device_id=str(info.get("device_id") or ""),
        answered_from=address,
        url=_api_url(info, address),
        wifi=wifi,
        usb=usb,
        raw=info,
    )


def _fetch_device_json(address: str, info: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    service = info.get("service") or {}
    port = int(service.get("http_port") or HTTP_PORT)
    path = str(service.get("http_path") or "/device.json")
    try:
        resp = httpx.get(f"http://{address}:{port}{path}", timeout=timeout, follow_redirects=False)
        resp.raise_for_status()
        data = resp.json()
        return data if isinstance(data, dict) else None
    except (httpx.HTTPError, ValueError):
        logger.info("device.json at %s:%s did not answer; using the UDP reply", address, port)
        return None


def discover(
    *, window_s: float = WINDOW_S, targets: list[tuple[str, int]] | None = None, http_timeout: float = 2.0
) -> list[Found]:
    """Broadcast once, collect answers for ``window_s``, read each device.json. Deduplicated by device."""
    answers: dict[str, tuple[str, dict[str, Any]]] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        sock.bind(("0.0.0.0", 0))
        for host, port in targets or _targets():
            try:
                sock.sendto(TOKEN, (host, port))
            except OSError as exc:
                logger.warning("discovery to %s:%s failed: %s", host, port, exc)
        deadline = time.monotonic() + window_s
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data, (address, _port) = sock.recvfrom(65535)
            except OSError:  # includes the timeout
                break
            try:
                info = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                continue
            if isinstance(info, dict):
                key = str(info.get("device_id") or info.get("serial_number") or address)
                answers.setdefault(key, (address, info))
    found = []
    for address, info in answers.values():
        found.append(_parse(_fetch_device_json(address, info, http_timeout) or info, address))
    return sorted(found, key=lambda f: f.name)
