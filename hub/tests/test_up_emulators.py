"""Issue 25: `make up` runs a pool of emulated Tiinys (``HUB_EMULATORS=N``), each registered as a device, each
under the run record like every process it starts, all named in the banner."""

from __future__ import annotations

import json
import os
import signal

import pytest

from hub.testing import load_script
from hub.tests.test_up_supervision import (
    MakeUp,
    _kill_all,
    _manage_shell,
    _wait_for,
    hub_processes,
    manifest_kept,
    up_env,
)

__all__ = ["manifest_kept"]  # a fixture, used by name

KEY = "emulators-test-key"


class _Manager:
    def __init__(self) -> None:
        self.processes: list[tuple[str, str, dict]] = []

    def add_process(self, name, cmd, env=None):
        self.processes.append((name, cmd, env or {}))


def test_the_ports_are_the_first_then_the_next_free_ones_never_the_hubs_own(monkeypatch):
    up = load_script("up")
    taken = {8801, 8803}
    monkeypatch.setattr(up, "port_free", lambda host, port: port not in taken)
    assert up.emulator_ports(8800, 1) == [8800]
    assert up.emulator_ports(8800, 3, avoid={8802}) == [8800, 8804, 8805]
    taken.add(8800)
    with pytest.raises(SystemExit):
        up.emulator_ports(8800, 2)


def test_each_emulated_tiiny_is_its_own_process_and_device_the_first_the_default(monkeypatch, tmp_path):
    up = load_script("up")
    monkeypatch.setenv("HUB_EMULATOR_API_KEY", KEY)
    monkeypatch.setenv("HUB_EMULATOR_PORT", "8800")
    monkeypatch.setattr(up, "port_free", lambda host, port: True)
    added = []
    monkeypatch.setattr(up, "manage", lambda *args, **kw: added.append((args, kw.get("env") or {})) or "")
    manager = _Manager()

    emulated = up.add_emulator(manager, dict(os.environ), tmp_path, count=3, avoid={8801})

    assert emulated == [
        ("Tiiny (emulator)", "http://127.0.0.1:8800", "emulator"),
        ("Tiiny 2 (emulator)", "http://127.0.0.1:8802", "emulator-2"),
        ("Tiiny 3 (emulator)", "http://127.0.0.1:8803", "emulator-3"),
    ]
    assert [name for name, _cmd, _env in manager.processes] == ["emulator", "emulator-2", "emulator-3"]
    for (name, cmd, env), (_device, url, _process) in zip(manager.processes, emulated, strict=True):
        # Each under keepalive --once (dies with the supervisor, recorded in run/up.json), its own state folder,
        # the key in its environment only.
        assert "keepalive.py --once" in cmd and f"--port {url.rsplit(':', 1)[1]}" in cmd
        assert f"--data-dir {tmp_path / name}" in cmd
        assert KEY not in cmd and env["HUB_EMULATOR_API_KEY"] == KEY
    assert [args[args.index("--name") + 1] for args, _env in added] == [d for d, _u, _p in emulated]
    assert [args[args.index("--url") + 1] for args, _env in added] == [u for _d, u, _p in emulated]
    assert ["--default" in args for args, _env in added] == [True, False, False]
    assert all(env["HUB_DEVICE_API_KEY"] == KEY and KEY not in args for args, env in added)

    common = {"host": "127.0.0.1", "port": 8000, "login": "x", "lan": None, "allowed_hosts": ["localhost"]}
    banner = up.banner_text(**common, log_dir=tmp_path, emulated=[(d, u) for d, u, _p in emulated])
    lines = [line.strip() for line in banner.splitlines()]
    assert "Emulated devices (HUB_EMULATORS=3):" in lines
    assert "Tiiny 2 (emulator) at http://127.0.0.1:8802" in lines
    one = up.banner_text(**common, log_dir=tmp_path, emulated=[emulated[0][:2]])
    assert (
        "Emulated device: Tiiny (emulator) at http://127.0.0.1:8800  ·  a pool of two: HUB_EMULATORS=2" in one
    )


DEVICES = """
from devices.models import Device
print("devices", ";".join(f"{d.name}|{d.base_url}|{d.state}|{d.is_default}" for d in Device.objects.order_by("pk")))
"""


@pytest.mark.integration
def test_make_up_with_two_emulators_registers_and_records_both_and_ctrl_c_stops_them(tmp_path, manifest_kept):
    # The small profile: the fewest processes (one web process, beat in the worker) for what this test looks at.
    env = up_env(tmp_path, HUB_DEVICE="emulator", HUB_EMULATORS="2", HUB_PROFILE="small")
    del env["HUB_WEB_WORKERS"]
    hub = MakeUp(env)
    try:
        text = hub.wait_up()
        first = int(env["HUB_EMULATOR_PORT"])
        assert "Emulated devices (HUB_EMULATORS=2):" in text, text
        assert f"Tiiny (emulator) at http://127.0.0.1:{first}" in text
        second = [line for line in text.splitlines() if "Tiiny 2 (emulator) at http://127.0.0.1:" in line]
        assert len(second) == 1, text
        second_url = second[0].split(" at ", 1)[1].strip()

        def both_online() -> bool:
            rows = _manage_shell(env, DEVICES).strip().splitlines()[-1].removeprefix("devices ").split(";")
            found = {
                name: (url, state, default) for name, url, state, default in (r.split("|") for r in rows)
            }
            assert set(found) == {"Tiiny (emulator)", "Tiiny 2 (emulator)"}, found
            assert (
                found["Tiiny (emulator)"][0] == f"http://127.0.0.1:{first}"
                and found["Tiiny (emulator)"][2] == "True"
            )
            assert found["Tiiny 2 (emulator)"][0] == second_url and found["Tiiny 2 (emulator)"][2] == "False"
            return all(state == "online" for _url, state, _default in found.values())

        _wait_for(both_online, timeout=60, what="both emulated Tiinys online (the hub's poller reached them)")
        _wait_for(lambda: (tmp_path / "run" / "up.json").exists(), what="the run record")
        recorded = {e["name"] for e in json.loads((tmp_path / "run" / "up.json").read_text())["processes"]}
        assert {"emulator", "emulator-2", "emulator (helper)", "emulator-2 (helper)"} <= recorded, recorded
        assert (tmp_path / "logs" / "emulator-2.log").exists()
        os.killpg(hub.proc.pid, signal.SIGINT)  # Ctrl-C
        rest, _ = hub.proc.communicate(timeout=30)
        assert "stopped at" in rest, rest
        _wait_for(lambda: not hub_processes(tmp_path), timeout=10, what="every process, both emulators too")
    finally:
        hub.stop()
        _kill_all(hub_processes(tmp_path))
