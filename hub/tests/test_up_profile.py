"""Issue 24 item 9: a small box runs the hub with fewer processes (hub/profile.py), chosen by its memory or
HUB_PROFILE, and says which in the banner and up.log."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from hub import profile
from hub.env import SettingError
from hub.tests.test_up_supervision import MakeUp, _kill_all, _wait_for, hub_processes, manifest_kept, up_env

__all__ = ["manifest_kept"]  # a fixture, used by name


def test_the_profile_follows_the_machines_memory_unless_named(monkeypatch):
    monkeypatch.delenv("HUB_PROFILE", raising=False)
    monkeypatch.delenv("HUB_WEB_WORKERS", raising=False)
    monkeypatch.setattr(profile, "memory_mb", lambda: 1900)
    small = profile.choose()
    assert (small.name, small.web_workers, small.pool, small.beat_in_worker) == ("small", 1, 1, True)
    assert "1.9 GB of memory" in small.describe()
    monkeypatch.setattr(profile, "memory_mb", lambda: 8 * 1024)
    assert profile.choose().name == "standard" and not profile.choose().beat_in_worker
    monkeypatch.setenv("HUB_PROFILE", "small")
    assert profile.choose().name == "small" and "HUB_PROFILE=small" in profile.choose().describe()
    monkeypatch.setenv("HUB_WEB_WORKERS", "2")
    assert profile.choose().web_workers == 2  # still the person's to set
    monkeypatch.setenv("HUB_PROFILE", "tiny")
    with pytest.raises(SettingError, match="HUB_PROFILE='tiny' must be one of: auto, small, standard"):
        profile.choose()


def test_the_small_profile_runs_beat_inside_the_worker_and_one_web_process():
    small = profile.choose("small").commands(
        host="127.0.0.1", port=8000, data_dir=Path("/d"), python="py", wrap=["py", "keepalive.py"]
    )
    assert set(small) == {"web", "worker"}
    assert small["worker"][:5] == ["py", "keepalive.py", "py", "-m", "hub.profile"]
    assert (
        "--concurrency=1" in small["worker"] and "--beat-schedule=/d/celerybeat-schedule" in small["worker"]
    )
    assert small["web"][-2:] == ["--workers", "1"]
    standard = profile.choose("standard").commands(
        host="127.0.0.1", port=8000, data_dir=Path("/d"), python="py", wrap=[]
    )
    assert set(standard) == {"web", "worker", "beat"} and "--concurrency=2" in standard["worker"]


def test_the_memory_is_read_from_this_machine():
    mb = profile.memory_mb()
    assert mb is None or mb > 100


@pytest.mark.integration
def test_make_up_on_the_small_profile_is_healthy_with_beat_in_the_worker(tmp_path, manifest_kept):
    env = up_env(tmp_path, HUB_DEVICE="none", HUB_PROFILE="small")
    del env["HUB_WEB_WORKERS"]
    hub = MakeUp(env)
    try:
        text = hub.wait_up()
        assert "Profile small (HUB_PROFILE=small): 1 web process(es), worker pool of 1" in text, text
        assert "profile small" in (tmp_path / "logs" / "up.log").read_text()

        def healthy() -> bool:
            try:
                return httpx.get(f"{hub.url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        _wait_for(healthy, timeout=60, what="/healthz 200 (worker heartbeat and beat tick)")
        # healthy means beat ticks (hub.health.check_beat); no beat process or log of its own: it is in the worker
        assert not (tmp_path / "logs" / "beat.log").exists()
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in hub_processes(tmp_path)]
        assert not [c for c in commands if b"beat" in c], "a separate beat process"
        os.killpg(hub.proc.pid, signal.SIGINT)  # Ctrl-C (make itself exits 130 without a terminal)
        rest, _ = hub.proc.communicate(timeout=30)
        assert "stopped at" in rest, rest
        _wait_for(lambda: not hub_processes(tmp_path), timeout=10, what="every process to stop")
    finally:
        hub.stop()
        _kill_all(hub_processes(tmp_path))
