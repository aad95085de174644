"""A host as the hub's settings and pages take it: a name or an IP address in any spelling a resolver accepts,
with an optional port. Django-free, so the settings check ``HUB_NOTIFY_PRIVATE_HOSTS`` with the very parser
``notify.targets`` reads it with (a typo then stops start-up, instead of failing every check later)."""

from __future__ import annotations

import ipaddress
import re
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# What inet_aton takes as an IPv4 address: one to four parts, each decimal, octal (leading 0) or hex (0x).
_IPV4_SPELLING = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$", re.IGNORECASE)


def literal(host: str) -> IPAddress | None:
    """``host`` as an IP address when it is one, in any spelling a resolver accepts: dotted, decimal
    (2130706433), hex (0x7f.1), octal (0177.0.0.1), short (127.1), IPv6 with or without brackets or a zone."""
    text = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        pass
    if _IPV4_SPELLING.match(text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def parse_entry(text: str) -> tuple[str, int | None]:
    """``host`` or ``host:port`` (an IPv6 address with a port in brackets: ``[fd00::5]:8123``) as (host, port);
    ValueError when it is neither."""
    text = text.strip().lower().rstrip(".")
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = _port(rest.removeprefix(":"))
    elif text.count(":") == 1:
        host, raw = text.split(":")
        port = _port(raw)
    if not host or any(c.isspace() or c in "/@?#" for c in host):
        raise ValueError(f"{text!r} is not a host name or address")
    ip = literal(host)
    return (str(ip) if ip else host), port


def _port(raw: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{raw!r} is not a port")
    return int(raw)
