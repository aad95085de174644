"""Where a notification may connect: the one rule for every way out (webhook, Apprise, Web Push).

A target on the hub's own machine or on the private network (loopback, RFC 1918, unique-local, link-local with
the cloud metadata address, multicast, unspecified, shared and reserved ranges) is refused unless an admin
allowed its host: ``HUB_NOTIFY_PRIVATE_HOSTS`` or the Private hosts page (:class:`notify.models.PrivateHost`).
Any account may add a channel, so without this a channel is a way to call the household's LAN from the hub and
read the answer back in its delivery reasons.

The check runs where the connection is made, on the address the connection then uses: :func:`checked_addresses`
resolves the name once (through :func:`resolve`, the seam the tests replace) and each way out connects to one
of the addresses it returned, never to the name again, so a name that changes its answer between the check and
the connect gains nothing. :class:`CheckedBackend` does it for httpx (webhooks); :func:`guarded` for
``requests`` (Apprise's HTTP services and pywebpush), through urllib3's one function that opens connections.
"""

from __future__ import annotations

import contextvars
import ipaddress
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
from django.conf import settings
from django.core.exceptions import ValidationError

from hub.hostport import IPAddress, literal, parse_entry
from notify.models import PrivateHost
from notify.selectors import require_household_admin

BLOCKED = (
    "blocked: a private address (an admin can allow its host: Household notifications → Private hosts, "
    "or HUB_NOTIFY_PRIVATE_HOSTS)"
)
PRIVATE_MAIL = (
    "This address is on the hub's own machine or the private network. An admin can allow its host "
    "(Household notifications → Private hosts)."
)

# Ranges ipaddress counts as global that still reach no public host: IPv4-compatible IPv6 (::a.b.c.d) and the
# local-use NAT64 prefix. The well-known NAT64 prefix is reduced to its IPv4 address instead (_embedded).
_NOT_PUBLIC = (ipaddress.ip_network("::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Blocked(Exception):
    """A target on a private address no admin allowed."""

    def __init__(self) -> None:
        super().__init__(BLOCKED)


class Unresolvable(OSError):
    """The name has no address (a typo, or no DNS at the moment)."""


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` has, as the system's resolver answers. The tests replace this function with their
    own resolver, which is how a name can be made to answer loopback."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# -- addresses -----------------------------------------------------------------------------------------------
def _embedded(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (mapped ::ffff:a.b.c.d, 6to4, NAT64), which is where it leads."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def is_public(ip: IPAddress) -> bool:
    """True for an address on the internet: not this machine, not the private network, not a special range."""
    if any(ip in net for net in _NOT_PUBLIC if net.version == ip.version):
        return False
    ip = _embedded(ip)
    special = ip.is_multicast or ip.is_unspecified or ip.is_reserved or ip.is_link_local or ip.is_loopback
    site_local = isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local
    return ip.is_global and not special and not site_local


# -- what admins allowed -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Allowed:
    """The private hosts admins allowed: (host, port or None for any port)."""

    entries: frozenset[tuple[str, int | None]] = frozenset()

    def permits(self, host: str, port: int, ip: IPAddress) -> bool:
        names = {host.lower().rstrip("."), str(ip), str(_embedded(ip))}
        return any(h in names and p in (None, port) for h, p in self.entries)


def allowed_hosts() -> Allowed:
    """What ``HUB_NOTIFY_PRIVATE_HOSTS`` and the Private hosts page allow, read once per delivery or check."""
    entries = [parse_entry(text) for text in settings.HUB_NOTIFY_PRIVATE_HOSTS]
    entries += PrivateHost.objects.values_list("host", "port")
    return Allowed(frozenset(entries))


def private_host_add(*, by: Any, text: str) -> PrivateHost:
    """Allow ``text`` (host or host:port) for every channel; admins only (PermissionDenied)."""
    require_household_admin(by)
    try:
        host, port = parse_entry(text)
    except ValueError:
        raise ValidationError(
            {"host": "Write a host name or address, with a port if you like: ha.lan, 192.168.1.20:8123, "
             "[fd00::5]:8080."}
        ) from None  # fmt: skip
    row, _ = PrivateHost.objects.get_or_create(host=host, port=port, defaults={"added_by": by})
    return row


def private_host_remove(*, by: Any, host_id: int) -> None:
    """No channel reaches that host any more (the next send is blocked); admins only."""
    require_household_admin(by)
    PrivateHost.objects.filter(pk=host_id).delete()


# -- the check -------------------------------------------------------------------------------------------------
def _addresses(host: str, port: int) -> list[IPAddress]:
    """``host``'s addresses: itself when it is one, else what :func:`resolve` answers (Unresolvable if none)."""
    ip = literal(host)
    if ip is not None:
        return [ip]
    try:
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolve(host, port)]
    except (socket.gaierror, UnicodeError, ValueError) as exc:  # ValueError: a name no resolver could take
        raise Unresolvable(str(exc)) from None
    if not addresses:
        raise Unresolvable(host)
    return addresses


def checked_addresses(host: str, port: int, allowed: Allowed) -> list[IPAddress]:
    """The addresses to connect to for ``host:port``: every one public, or allowed. Raises :class:`Blocked`
    when any is neither (a name answering one public and one private address is refused whole: which one a
    client picks is not ours to know), :class:`Unresolvable` when the name has none."""
    addresses = _addresses(host, port)
    for address in addresses:
        if not is_public(address) and not allowed.permits(host, port, address):
            raise Blocked
    return addresses


def refusal(host: str, port: int) -> str | None:
    """At add time: why a channel may not reach ``host:port``, or None. A name that does not resolve now is
    let through (DNS may be away for a moment); the send checks it again."""
    try:
        checked_addresses(host, port, allowed_hosts())
    except Blocked:
        return (
            "This target is on the hub's own machine or the private network. An admin can allow its host "
            "(Household notifications → Private hosts)."
        )
    except Unresolvable:
        return None
    return None


def is_allowed_host(host: str, port: int) -> bool:
    """True when an admin allowed ``host`` (by its name, or by every address it has)."""
    allowed = allowed_hosts()
    try:
        addresses = _addresses(host, port)
    except Unresolvable:
        return False
    return all(allowed.permits(host, port, address) for address in addresses)


# -- connecting: httpx (webhooks) -------------------------------------------------------------------------------
class CheckedBackend(httpcore.SyncBackend):
    """httpcore's network backend, connecting only to addresses the check allowed. TLS (SNI, the certificate's
    name) and the Host header stay the URL's name: httpcore sets them apart from the address it connects to."""

    def __init__(self, allowed: Allowed) -> None:
        self.allowed = allowed

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = checked_addresses(host, port, self.allowed)
        except Unresolvable:
            raise httpcore.ConnectError("the name does not resolve") from None
        last: Exception = httpcore.ConnectError("no address")
        for address in addresses:
            try:
                return super().connect_tcp(str(address), port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc  # the next address, as a resolver's own loop would
        raise last


# -- connecting: requests (Apprise, pywebpush) -----------------------------------------------------------------
@dataclass
class Guard:
    """One delivery's guard over urllib3's connections; ``blocked`` tells the sender why a library that
    swallows errors (Apprise) failed."""

    allowed: Allowed
    blocked: bool = False
    unresolved: bool = False
    timed_out: bool = False
    unreachable: bool = False


_guard: contextvars.ContextVar[Guard | None] = contextvars.ContextVar("notify_target_guard", default=None)
_original_create_connection: Any = None


@contextmanager
def guarded() -> Iterator[Guard]:
    """While it is open, every connection urllib3 makes in this context goes to a checked address. Outside it
    (the rest of the hub, other threads) urllib3 is left as it was."""
    _install_urllib3_guard()
    guard = Guard(allowed_hosts())
    token = _guard.set(guard)
    try:
        yield guard
    finally:
        _guard.reset(token)


def _install_urllib3_guard() -> None:
    # urllib3 opens every connection through util.connection.create_connection (HTTPConnection._new_conn calls
    # it through the module): replacing it once covers requests, whatever session or adapter a library makes.
    global _original_create_connection
    from urllib3.util import connection

    if _original_create_connection is None:
        _original_create_connection = connection.create_connection
        connection.create_connection = _checked_create_connection


def _checked_create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
    guard = _guard.get()
    if guard is None:
        return _original_create_connection(address, *args, **kwargs)
    host, port = address
    try:
        addresses = checked_addresses(host, port, guard.allowed)
    except Blocked:
        guard.blocked = True
        raise ConnectionRefusedError(BLOCKED) from None
    except Unresolvable:
        guard.unresolved = True
        raise
    last: OSError = OSError("no address")
    for ip in addresses:
        try:
            return _original_create_connection((str(ip), port), *args, **kwargs)
        except OSError as exc:
            last = exc
    guard.timed_out, guard.unreachable = isinstance(last, TimeoutError), True
    raise last
