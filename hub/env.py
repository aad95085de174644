"""Typed readers for settings that come from the environment.

Every reader fails loudly with :class:`SettingError`, whose message is one line naming the
variable and the expected form, so a bad value stops start-up before anything else happens.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class SettingError(ImproperlyConfigured):
    """A setting is missing or malformed. ``str(err)`` is a one-line explanation."""


def load_env_file(path: Path) -> None:
    """Read KEY=VALUE lines from ``path`` into os.environ without overriding what is already set.

    ``make up`` writes the generated secret key into this git-ignored file, so every process it
    starts (and any later ``manage.py`` call) sees the same value.
    """
    if not path.is_file():
        return
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise SettingError(f"{path}:{lineno}: expected KEY=VALUE, got {raw!r}")
        os.environ.setdefault(key, value.strip().strip("'\""))


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise SettingError(f"{name} is required (a non-empty string)")
        return default
    return value


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise SettingError(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise SettingError(f"{name}={value!r} is not an integer") from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise SettingError(f"{name}={number} is out of range ({minimum}..{maximum})")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise SettingError(f"{name}={value!r} is not a number (e.g. 2 or 0.5)") from None
    if minimum is not None and number < minimum:
        raise SettingError(f"{name}={number} must be at least {minimum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise SettingError(f"{name} is empty (a comma-separated list, e.g. 'localhost,hub.lan')")
    return items


def env_networks(
    name: str, default: list[str], *, example: str = "127.0.0.1,::1,192.168.1.0/24"
) -> list[str]:
    """A comma-separated list of IP addresses or networks (CIDR); "none" is the empty list."""
    items = env_list(name, default)
    if [item.lower() for item in items] == ["none"]:
        return []
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise SettingError(f"{name}: {item!r} is not an IP address or network (e.g. {example})") from None
    return items


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip()
    if value not in choices:
        raise SettingError(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


def env_time_zone(name: str, default: str) -> str:
    value = os.environ.get(name, default).strip()
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise SettingError(f"{name}={value!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") from None
    return value


def env_url(name: str, default: str | None, *, schemes: tuple[str, ...]) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    value = value.strip()
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme not in schemes:
        raise SettingError(
            f"{name}={without_password(value)!r} must be a URL starting with one of: "
            + ", ".join(f"{s}://" for s in schemes)
        )
    return value


def env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    path = Path(value).expanduser() if value else default
    return path.resolve()


def without_password(url: str) -> str:
    """``url`` fit to print: its password (if any) replaced by ``**``, as Celery prints its broker."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:**@{host}"))


_RATE_PERIODS = {"s": 1, "m": 60, "h": 3600}


def parse_rate(value: str, *, name: str = "rate") -> tuple[int, int] | None:
    """``"30/m"`` -> ``(30, 60)``: (count, window seconds); ``/s`` and ``/h`` too. ``"0"`` -> None (no limit)."""
    text = str(value).strip()
    if text == "0":
        return None
    match = re.fullmatch(r"(\d+)\s*/\s*([smhSMH])", text)
    if not match:
        raise SettingError(f"{name}={value!r} is not a rate (use e.g. 30/m, 5/s or 200/h; 0 turns it off)")
    count = int(match.group(1))
    return None if count == 0 else (count, _RATE_PERIODS[match.group(2).lower()])


def env_rate(name: str, default: str) -> str:
    """A rate such as ``30/m`` (see :func:`parse_rate`), checked at start-up; returns the trimmed text."""
    value = os.environ.get(name)
    value = default if value is None or value.strip() == "" else value.strip()
    parse_rate(value, name=name)
    return value


def env_clock(name: str, default: str) -> tuple[int, int]:
    """A time of day, ``HH:MM`` (24-hour clock), as (hour, minute)."""
    value = os.environ.get(name, default).strip() or default
    match = re.fullmatch(r"([01]?\d|2[0-3]):([0-5]\d)", value)
    if not match:
        raise SettingError(f"{name}={value!r} must be a time of day, HH:MM (e.g. 13:30)")
    return int(match[1]), int(match[2])
