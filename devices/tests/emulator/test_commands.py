"""The emulators' commands, as docs/devices.md tells people to run them: each serves its device on the port given,
the Tiiny behind the key from its environment (never from argv), and stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hub.redis_server import free_port

pytestmark = pytest.mark.integration
BASE = Path(__file__).resolve().parents[3]


def serve(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", *args], cwd=BASE, env={**os.environ, **env},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def answer(url: str, headers: dict[str, str] | None = None, timeout: float = 30.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return httpx.get(url, headers=headers, timeout=2)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_emulate_tiiny_serves_a_tiiny_behind_the_key_from_its_environment(tmp_path):
    port, key = free_port(), "key-from-the-environment"
    proc = serve(
        ["emulate_tiiny", "--port", str(port), "--speed", "60", "--data-dir", str(tmp_path),
         "--discovery-port", "0", "--udp-port", "0"],
        {"HUB_EMULATOR_API_KEY": key},
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/api/v1/sys/status"
        assert answer(url).status_code == 401
        assert answer(url, {"Authorization": f"Bearer {key}"}).status_code == 200
        assert key not in " ".join(Path(f"/proc/{proc.pid}/cmdline").read_text().split("\0"))
    finally:
        stop(proc)


def test_emulate_tensorsharp_serves_a_tensorsharp_host(tmp_path):
    port = free_port()
    proc = serve(["emulate_tensorsharp", "--port", str(port), "--data-dir", str(tmp_path)], {})
    try:
        assert answer(f"http://127.0.0.1:{port}/health").status_code == 200
        assert "loaded" in answer(f"http://127.0.0.1:{port}/api/models").json()
    finally:
        stop(proc)
