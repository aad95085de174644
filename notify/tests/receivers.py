"""A tiny HTTP receiver on loopback for the senders' tests: it records every request and answers with the
statuses it is told (the last one repeats)."""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[Received] = field(default_factory=list)
    connections: int = (
        0  # every TCP connection, a request in it or not (a TLS hello to this plain server too)
    )
    body: bytes = b"ok"
    server: http.server.ThreadingHTTPServer | None = None
    arrived: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def wait(self, count: int = 1, timeout: float = 60) -> list[Received]:
        """Wait until ``count`` requests arrived (not a timed assertion: a bound on a hang)."""
        deadline = threading.Event()
        for _ in range(int(timeout * 20)):
            if len(self.requests) >= count:
                return self.requests
            deadline.wait(0.05)
        raise AssertionError(f"{len(self.requests)} of {count} requests arrived")


def start_receiver(statuses: list[int] | None = None, body: bytes = b"ok") -> Receiver:
    receiver = Receiver(statuses=list(statuses or [200]), body=body)
    counting = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def setup(self) -> None:
            with counting:  # one thread per connection
                receiver.connections += 1
            super().setup()

        def do_DELETE(self) -> None:
            self.do_POST()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            receiver.requests.append(
                Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            index = min(len(receiver.requests) - 1, len(receiver.statuses) - 1)
            status = receiver.statuses[index]
            self.send_response(status)
            self.send_header(
                "Content-Type", "application/json" if receiver.body.startswith(b"{") else "text/plain"
            )
            self.send_header("Content-Length", str(len(receiver.body)))
            self.end_headers()
            self.wfile.write(receiver.body)
            receiver.arrived.set()

        def log_message(self, *args) -> None:  # quiet
            pass

    receiver.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=receiver.server.serve_forever, daemon=True).start()
    return receiver
