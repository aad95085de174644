"""Helpers that start device emulators as real processes for tests and benchmarks.

The emulators are always run out of process (``python -m devices.emulator <kind> ...``) so tests talk to
them over real loopback HTTP, exactly as the hub talks to a device. `_spawn` is generic: other emulator
kinds (e.g. TensorSharp) build their own argument list and reuse it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

# Where `python -m devices.emulator` must be importable from: the repository root.
REPO_ROOT = Path(__file__).resolve().parents[2]

READY_TIMEOUT_S = 10.0


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    """A port that is free right now on `host` (TCP by default, UDP with `kind=socket.SOCK_DGRAM`)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class RunningEmulator:
    """A live emulator process plus the knobs of its control API (``/__emulator__/...``)."""

    base_url: str
    api_key: str
    process: subprocess.Popen
    discovery_port: int | None = None
    udp_port: int | None = None
    args: list[str] = field(default_factory=list, repr=False)
    stderr_path: Path | None = field(default=None, repr=False)
    ready_path: str = "/__emulator__/info"

    # -- control API ----------------------------------------------------------------------------------
    def control(self, method: str, path: str, json: Any = None) -> dict:
        """Call ``/__emulator__/<path>`` (no auth) and return the decoded JSON body; raises on HTTP errors."""
        path = path if path.startswith("/") else f"/__emulator__/{path}"
        resp = httpx.request(method, self.base_url + path, json=json, timeout=30.0)
        resp.raise_for_status()
        return resp.json() if resp.content else {}

    def power_cycle(self) -> dict:
        return self.control("POST", "power_cycle")

    def unlock(self) -> dict:
        return self.control("POST", "unlock")

    def lock(self) -> dict:
        return self.control("POST", "lock")

    def set_quirks(self, enabled: list[str] | str) -> dict:
        """Enable exactly `enabled` ("all", "none" or a list of quirk names); every other quirk goes off."""
        return self.control("POST", "quirks", {"enabled": enabled})

    def enable_quirks(self, *names: str) -> dict:
        return self.control("POST", "quirks", {"enable": list(names)})

    def disable_quirks(self, *names: str) -> dict:
        return self.control("POST", "quirks", {"disable": list(names)})

    def set_speed(self, speed: float) -> dict:
        return self.control("POST", "speed", {"speed": speed})

    def cut_downloads(self, count: int = 1, fraction: float = 0.6) -> dict:
        """The next ``count`` result downloads drop their connection after ``fraction`` of the bytes."""
        return self.control("POST", "/__emulator__/cut_downloads", {"count": count, "fraction": fraction})

    def counters(self) -> dict:
        return self.control("GET", "counters")

    def reset_counters(self) -> dict:
        return self.control("POST", "reset_counters")

    def reset(self, **kw: Any) -> dict:
        """Fresh device state; keyword arguments go in the body (quirks=..., speed=..., locked=...)."""
        return self.control("POST", "reset", kw or None)

    def load(self, model_id: str, **kw: Any) -> dict:
        """Make `model_id` instantly running (test setup; skips load time and after-load quirks)."""
        return self.control("POST", "load", {"model_id": model_id, **kw})

    def info(self) -> dict:
        return self.control("GET", "info")

    # -- HTTP convenience -----------------------------------------------------------------------------
    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def client(self, **kw: Any) -> httpx.Client:
        """An httpx client bound to the device with the API key set (caller closes it)."""
        kw.setdefault("timeout", 30.0)
        return httpx.Client(base_url=self.base_url, headers=self.headers, **kw)

    def async_client(self, **kw: Any) -> httpx.AsyncClient:
        kw.setdefault("timeout", 30.0)
        return httpx.AsyncClient(base_url=self.base_url, headers=self.headers, **kw)

    # -- process lifecycle ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 5 s)."""
        _terminate(self.process)

    def restart(self) -> None:
        """Start a new process with the same arguments (same ports); state is lost unless --data-dir."""
        self.stop()
        fresh = _spawn(self.args, base_url=self.base_url, api_key=self.api_key, ready_path=self.ready_path)
        self.process, self.stderr_path = fresh.process, fresh.stderr_path
        self._read_ports()

    def _read_ports(self) -> None:
        if self.ready_path != "/__emulator__/info":
            return
        info = self.info()
        self.discovery_port = info.get("discovery_port")
        self.udp_port = info.get("udp_port")


def _terminate(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def _spawn(
    args: list[str],
    *,
    base_url: str,
    api_key: str = "",
    ready_path: str = "/__emulator__/info",
    ready_timeout: float = READY_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> RunningEmulator:
    """Start ``python -m devices.emulator <args>`` and poll `base_url + ready_path` until it answers.

    stderr goes to a temp file (a pipe could fill up and stall the emulator); on failure its tail is put
    in the raised error so a broken emulator explains itself in the test output.
    """
    stderr_file = tempfile.NamedTemporaryFile(prefix="emulator-", suffix=".log", delete=False)
    process_env = {**os.environ, **(env or {})}
    process_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), process_env.get("PYTHONPATH", "")) if p
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "devices.emulator", *args],
        cwd=REPO_ROOT,
        env=process_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr_file,
    )
    stderr_file.close()
    running = RunningEmulator(
        base_url=base_url,
        api_key=api_key,
        process=process,
        args=list(args),
        stderr_path=Path(stderr_file.name),
        ready_path=ready_path,
    )
    deadline = time.monotonic() + ready_timeout
    with httpx.Client(timeout=1.0) as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"emulator exited with {process.returncode}:\n{_tail(running.stderr_path)}"
                )
            try:
                if client.get(base_url + ready_path).status_code < 500:
                    return running
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                _terminate(process)
                raise RuntimeError(
                    f"emulator did not answer {base_url}{ready_path} within {ready_timeout:.0f} s:\n"
                    f"{_tail(running.stderr_path)}"
                )
            time.sleep(0.02)


def _tail(path: Path | None, limit: int = 4000) -> str:
    if path is None or not path.exists():
        return "(no stderr)"
    return path.read_text(errors="replace")[-limit:] or "(empty stderr)"


@contextlib.contextmanager
def run_tiiny(
    *,
    speed: float = 600,
    api_key: str = "test-key",
    quirks: str = "all",
    locked: bool = False,
    port: int = 0,
    discovery: bool = False,
    data_dir: str | os.PathLike | None = None,
    host: str = "127.0.0.1",
) -> Iterator[RunningEmulator]:
    """Run a Tiiny Pocket emulator on loopback for the duration of the block.

    `port=0` picks a free port. With `discovery=True` the device.json HTTP server and the UDP responder
    run on ephemeral ports, reported as `discovery_port` / `udp_port`.
    """
    port = port or free_port(host)
    args = ["tiiny", "--host", host, "--port", str(port), "--speed", str(speed), "--api-key", api_key]
    args += ["--quirks", quirks]
    if locked:
        args.append("--locked")
    if discovery:
        args += ["--discovery-port", "0", "--udp-port", "0"]
    else:
        args += ["--discovery-port", "off", "--udp-port", "off"]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    emulator = _spawn(args, base_url=f"http://{host}:{port}", api_key=api_key)
    try:
        emulator._read_ports()
        yield emulator
    finally:
        emulator.stop()
        if emulator.stderr_path is not None:
            emulator.stderr_path.unlink(missing_ok=True)


@contextlib.contextmanager
def run_tensorsharp(
    *,
    speed: float = 600,
    model: str = "minimax-h3",
    port: int = 0,
    data_dir: str | os.PathLike | None = None,
    host: str = "127.0.0.1",
) -> Iterator[RunningEmulator]:
    """Run a TensorSharp.Server.Host emulator (no auth) on loopback for the duration of the block."""
    port = port or free_port(host)
    args = ["tensorsharp", "--host", host, "--port", str(port), "--speed", str(speed), "--model", model]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    emulator = _spawn(args, base_url=f"http://{host}:{port}", ready_path="/health")
    try:
        yield emulator
    finally:
        emulator.stop()
        if emulator.stderr_path is not None:
            emulator.stderr_path.unlink(missing_ok=True)
