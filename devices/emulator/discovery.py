"""Discovery side of the emulated Tiiny: ``GET :39218/device.json`` and the UDP ``GADGET_DISCOVER_V1`` responder.

Both are unauthenticated and bind to the emulator's --host. They are tiny asyncio servers in the same event
loop as the API (the real device runs them in a separate "pcsvr" service, so they keep answering while the
API is locked).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any

from devices.emulator.tiiny_state import DeviceState

log = logging.getLogger("devices.emulator.discovery")

DISCOVERY_TOKEN = b"GADGET_DISCOVER_V1"


def device_json(state: DeviceState) -> dict[str, Any]:
    """The §2.2 shape (recorded from a real device), with this emulator's addresses and ports."""
    opts = state.options
    host = "127.0.0.1" if opts.host in ("0.0.0.0", "", "::") else opts.host
    device_id = hashlib.sha256(opts.serial_number.encode()).hexdigest()[:32]
    return {
        "schema_version": "1",
        "device_name": opts.device_name,
        "device_id": device_id,
        "serial_number": opts.serial_number,
        "hostname": "tiinyhost",
        "discovery_token": DISCOVERY_TOKEN.decode(),
        "transport": ["lan", "usb"],
        "service": {
            "instance_name": opts.device_name,
            "dns_sd": "_gadget._tcp",
            "http_port": state.discovery_port or 39218,
            "http_path": "/device.json",
            "udp_discovery_port": state.udp_port or 39217,
        },
        # The real device says port 0 (= its gateway on 80); the emulator's API is on --port.
        "backend": {"scheme": "http", "port": opts.port, "path": "/"},
        "usb": {
            "interface": "usb0",
            "active": 1,
            "network": "172.17.7.176/30",
            "device_ip": "172.17.7.177",
            "host_ip": "172.17.7.178",
        },
        "ipv4_addresses": [
            {"interface": "usb0", "address": "172.17.7.177"},
            {"interface": "wlan0", "address": host},
        ],
        "ipv6_addresses": [],
    }


async def _serve_http(state: DeviceState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = request_line.partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        if method in ("GET", "HEAD") and path == "/device.json":
            status, body = "200 OK", json.dumps(device_json(state)).encode()
        else:
            status, body = "404 Not Found", b'{"detail":"Not Found"}'
        headers = (
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(headers.encode() + (b"" if method == "HEAD" else body))
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()


class _UdpResponder(asyncio.DatagramProtocol):
    def __init__(self, state: DeviceState) -> None:
        self.state = state
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if data.strip() != DISCOVERY_TOKEN or self.transport is None:
            return  # a wrong token gets no reply at all
        self.transport.sendto(json.dumps(device_json(self.state)).encode(), addr)


class Discovery:
    """Starts/stops both discovery listeners; ports None = disabled, 0 = ephemeral."""

    def __init__(self, state: DeviceState) -> None:
        self.state = state
        self._server: asyncio.AbstractServer | None = None
        self._udp: asyncio.DatagramTransport | None = None

    async def start(self) -> None:
        opts, loop = self.state.options, asyncio.get_running_loop()
        if opts.discovery_port is not None:
            try:
                self._server = await asyncio.start_server(
                    lambda r, w: _serve_http(self.state, r, w), opts.host, opts.discovery_port
                )
                self.state.discovery_port = self._server.sockets[0].getsockname()[1]
            except OSError as exc:  # a busy port must not take the whole emulator down
                log.warning("discovery HTTP on %s:%s disabled: %s", opts.host, opts.discovery_port, exc)
        if opts.udp_port is not None:
            try:
                transport, _ = await loop.create_datagram_endpoint(
                    lambda: _UdpResponder(self.state), local_addr=(opts.host, opts.udp_port)
                )
                self._udp = transport  # type: ignore[assignment]
                self.state.udp_port = transport.get_extra_info("sockname")[1]
            except OSError as exc:
                log.warning("discovery UDP on %s:%s disabled: %s", opts.host, opts.udp_port, exc)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._udp is not None:
            self._udp.close()
