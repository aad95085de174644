"""Running the hub as a systemd service (issue 24): the unit `make install-service` writes, and the hub its ExecStart
starts, run the way systemd runs it (WorkingDirectory, Environment, EnvironmentFile, no terminal)."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hub.redis_server import free_port
from hub.testing import load_script

BASE = Path(__file__).resolve().parents[2]
SERVICE = BASE / "scripts" / "service.py"
# What systemd gives a service before its own Environment= lines (systemd.exec, "Environment variables").
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _service():
    return load_script("service")


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """A strict reader of systemd's unit syntax: sections, KEY=VALUE, comments; anything else fails the test."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if match := re.fullmatch(r"\[([A-Za-z]+)\]", line):
            current = sections.setdefault(match.group(1), {})
            continue
        match = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*)=(.*)", line)
        assert current is not None and match, f"line {n} is not a section or KEY=VALUE: {raw!r}"
        current.setdefault(match.group(1), []).append(match.group(2))
    return sections


def one(unit: dict, section: str, key: str) -> str:
    values = unit[section][key]
    assert len(values) == 1, (section, key, values)
    return values[0]


def unescape(value: str) -> str:
    return value.replace("%%", "%")


def env_file_values(path: Path) -> dict[str, str]:
    """What systemd reads from an EnvironmentFile= (the simple KEY=VALUE subset `make up` writes)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


# -- the unit's text ------------------------------------------------------------------------------------------
def test_the_user_unit_names_the_checkout_the_data_the_env_file_and_the_launcher(tmp_path):
    service = _service()
    checkout = tmp_path / "hub"
    checkout.mkdir()
    # Secrets in .env stay there: the unit names the file, never its values.
    (checkout / ".env").write_text("HUB_SECRET_KEY=s3cret-key-value\nHUB_DATA_DIR=srv/data\nHUB_PORT=8123\n")
    environ = {"HOME": str(tmp_path), "HUB_DEVICE_API_KEY": "device-key-from-env"}
    plan = service.make_plan(system=False, checkout=checkout, environ=environ)
    text = service.render(plan)
    assert "s3cret-key-value" not in text and "device-key-from-env" not in text
    unit = parse_unit(text)
    assert set(unit) == {"Unit", "Service", "Install"}
    assert one(unit, "Service", "WorkingDirectory") == str(checkout)
    assert (
        f"HUB_DATA_DIR={checkout / 'srv' / 'data'}" in unit["Service"]["Environment"]
    )  # relative: in checkout
    assert one(unit, "Service", "EnvironmentFile") == f"-{checkout / '.env'}"
    assert shlex.split(one(unit, "Service", "ExecStart")) == [
        str(checkout / ".venv" / "bin" / "python"),
        str(checkout / "scripts" / "up.py"),
    ]
    assert one(unit, "Service", "Restart") == "on-failure"
    assert one(unit, "Service", "UMask") == "0077"  # what the hub and systemd make is the owner's alone
    assert one(unit, "Service", "KillMode") == "mixed" and one(unit, "Service", "KillSignal") == "SIGTERM"
    assert one(unit, "Unit", "After") == one(unit, "Unit", "Wants") == "network-online.target"
    assert one(unit, "Install", "WantedBy") == "default.target"
    assert "User" not in unit["Service"]  # a user unit runs as its user


def test_the_data_folder_comes_from_the_environment_before_env_and_defaults_to_var(tmp_path):
    service = _service()
    (tmp_path / ".env").write_text("HUB_DATA_DIR=/srv/from-env-file\n")
    given = service.make_plan(system=False, checkout=tmp_path, environ={"HUB_DATA_DIR": "/srv/given"})
    assert given.data_dir == Path("/srv/given")
    assert service.make_plan(system=False, checkout=tmp_path, environ={}).data_dir == Path(
        "/srv/from-env-file"
    )
    (tmp_path / ".env").unlink()
    assert service.make_plan(system=False, checkout=tmp_path, environ={}).data_dir == tmp_path / "var"


def test_the_system_unit_runs_as_the_invoking_user_at_boot(tmp_path, monkeypatch):
    service = _service()
    monkeypatch.setattr(service, "invoking_user", lambda: "mia")
    unit = parse_unit(service.render(service.make_plan(system=True, checkout=tmp_path, environ={})))
    assert one(unit, "Service", "User") == "mia"
    assert one(unit, "Install", "WantedBy") == "multi-user.target"
    assert service.unit_dir(True) == Path("/etc/systemd/system")
    assert service.unit_dir(False, {"XDG_CONFIG_HOME": "/x/cfg"}) == Path("/x/cfg/systemd/user")
    assert service.unit_dir(False, {"HOME": "/home/mia"}) == Path("/home/mia/.config/systemd/user")


def _verify(unit_path: Path, *, user: bool, tmp_path: Path) -> subprocess.CompletedProcess:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run(
        ["systemd-analyze", *(["--user"] if user else []), "verify", str(unit_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},  # a user manager's, which this machine may lack
        timeout=60,
    )


@pytest.mark.parametrize("system", [False, True], ids=["user", "system"])
def test_systemd_accepts_the_unit_without_a_warning(tmp_path, system):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (the unit's syntax is checked by parse_unit above)")
    service = _service()
    # A checkout whose path needs quoting (a space) and escaping (% starts a systemd specifier).
    checkout = tmp_path / "my hub 100%"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (checkout / "scripts").mkdir()
    (checkout / "scripts" / "up.py").write_text("")
    plan = service.make_plan(system=system, checkout=checkout, environ={})
    unit_path = tmp_path / service.UNIT_NAME
    unit_path.write_text(service.render(plan))
    result = _verify(unit_path, user=not system, tmp_path=tmp_path)
    assert result.returncode == 0 and service.UNIT_NAME not in result.stderr, result.stderr
    exec_start = unescape(one(parse_unit(unit_path.read_text()), "Service", "ExecStart"))
    assert shlex.split(exec_start) == [str(plan.python), str(checkout / "scripts" / "up.py")]
    # The check can fail: a setting systemd does not know is reported.
    unit_path.write_text(unit_path.read_text().replace("KillMode=mixed", "KillMode=gently"))
    assert "kill mode" in _verify(unit_path, user=not system, tmp_path=tmp_path).stderr


# -- install / uninstall --------------------------------------------------------------------------------------
FAKE_SYSTEMCTL = """#!/bin/sh
echo "$@" >> "{log}"
{body}
"""


def _run_service(action: str, tmp_path: Path, *, systemctl: str | None) -> subprocess.CompletedProcess:
    """scripts/service.py in a home of its own; ``systemctl`` is a fake's body, or None for none on the PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "systemctl"
    fake.unlink(missing_ok=True)
    if systemctl is not None:
        fake.write_text(FAKE_SYSTEMCTL.format(log=tmp_path / "systemctl.log", body=systemctl))
        fake.chmod(0o755)
    env = {
        "PATH": str(bin_dir),  # only the fake (or nothing): this machine's own systemctl is never reached
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "HUB_PORT": str(free_port()),
    }
    return subprocess.run(
        [sys.executable, str(SERVICE), action],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_without_systemctl_the_unit_is_written_then_removed_and_the_commands_are_shown(tmp_path):
    unit = tmp_path / "config" / "systemd" / "user" / "tiiny-hub.service"
    installed = _run_service("install", tmp_path, systemctl=None)
    assert installed.returncode == 1  # written, but nothing runs yet
    out = installed.stdout
    assert unit.is_file() and f"wrote {unit}" in out
    assert "the unit is written but not enabled: systemctl is not installed here (no systemd)." in out
    assert "systemctl --user enable --now tiiny-hub.service" in out
    assert "loginctl enable-linger" in out
    removed = _run_service("uninstall", tmp_path, systemctl=None)
    assert removed.returncode == 0 and not unit.exists() and f"removed {unit}" in removed.stdout
    again = _run_service("uninstall", tmp_path, systemctl=None)
    assert again.returncode == 0 and "nothing to remove" in again.stdout


def test_a_user_manager_that_does_not_answer_is_named_in_one_line(tmp_path):
    unit = tmp_path / "config" / "systemd" / "user" / "tiiny-hub.service"
    failing = 'echo "Failed to connect to bus: No medium found" >&2; exit 1'
    installed = _run_service("install", tmp_path, systemctl=failing)
    assert installed.returncode == 1 and unit.is_file()
    assert (
        "not enabled: `systemctl --user daemon-reload` failed: Failed to connect to bus: No medium found."
        in installed.stdout
    )
    # An install made while systemd was away may still have been enabled by hand: its link goes too.
    wants = unit.parent / "default.target.wants" / "tiiny-hub.service"
    wants.parent.mkdir()
    wants.symlink_to(unit)
    removed = _run_service("uninstall", tmp_path, systemctl=failing)
    assert removed.returncode == 0 and not unit.exists() and not wants.is_symlink()
    assert "systemd was not told" in removed.stdout


def test_with_a_working_user_manager_it_enables_starts_then_disables(tmp_path):
    unit = tmp_path / "config" / "systemd" / "user" / "tiiny-hub.service"
    installed = _run_service("install", tmp_path, systemctl="exit 0")
    assert installed.returncode == 0 and "enabled and started" in installed.stdout and unit.is_file()
    removed = _run_service("uninstall", tmp_path, systemctl="exit 0")
    assert removed.returncode == 0 and not unit.exists()
    calls = (tmp_path / "systemctl.log").read_text().splitlines()
    assert calls == [
        "--user daemon-reload",
        "--user enable --now tiiny-hub.service",
        "--user disable --now tiiny-hub.service",
        "--user daemon-reload",
    ]


def test_make_passes_system_on_to_the_script():
    for args in (["SYSTEM=1"], ["ARGS=--system"]):
        dry = subprocess.run(
            ["make", "-n", "--no-print-directory", "install-service", *args],
            cwd=BASE,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert re.search(r"scripts/service.py install\s+--system\s*$", dry.stdout, re.M), (
            dry.stdout + dry.stderr
        )
    dry = subprocess.run(
        ["make", "-n", "uninstall-service"], cwd=BASE, capture_output=True, text=True, timeout=30
    )
    assert re.search(r"scripts/service.py uninstall\s*$", dry.stdout, re.M), dry.stdout


# -- ExecStart, run as systemd runs it ------------------------------------------------------------------------
def _process_tree(root: int) -> set[int]:
    from hub.testing import process_tree

    return set(process_tree(root))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.integration
def test_the_units_exec_start_starts_the_hub_and_sigterm_stops_it_cleanly(tmp_path):
    service = _service()
    port = free_port()
    data = tmp_path / "data"
    env_file = tmp_path / "hub.env"  # stands in for the checkout's .env, which this test must not touch
    env_file.write_text(
        "\n".join(
            [
                "# as `make up` writes it, plus this test's ports",
                f"HUB_PORT={port}",
                f"HUB_REDIS_PORT={free_port()}",
                f"HUB_EMULATOR_PORT={free_port()}",
                "HUB_WEB_WORKERS=1",
                "HUB_INSECURE_FAST_HASHER=1",
                "HUB_SECRET_KEY=service-test-key",
                "HUB_EMULATOR_API_KEY=service-test-emulator-key",
                "HUB_VAPID_PRIVATE_KEY=service-test",
                "HUB_REDIS_PASSWORD=service-test-redis",
                "",
            ]
        )
    )
    plan = dataclasses.replace(
        service.make_plan(system=False, environ={"HUB_DATA_DIR": str(data)}), env_file=env_file
    )
    unit = parse_unit(service.render(plan))["Service"]

    env = {
        "PATH": SYSTEMD_PATH,
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "USER": os.environ.get("USER", "root"),
    }
    for assignment in unit["Environment"]:
        key, _, value = unescape(shlex.split(assignment)[0]).partition("=")
        env[key] = value
    env.update(
        env_file_values(
            Path(unescape(one({"Service": unit}, "Service", "EnvironmentFile")).removeprefix("-"))
        )
    )
    argv = shlex.split(unescape(one({"Service": unit}, "Service", "ExecStart")))
    journal = tmp_path / "journal.txt"
    # make up collects static files into the checkout; a manifest left there would switch later test servers to
    # hashed names (hub.settings), so it goes again unless it was there before.
    manifest = BASE / "staticfiles" / "staticfiles.json"
    had_manifest = manifest.exists()
    with journal.open("w") as out:
        hub = subprocess.Popen(
            argv,
            cwd=unescape(one({"Service": unit}, "Service", "WorkingDirectory")),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # as systemd starts a service: a session of its own, no terminal
        )
    tree: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        status = None
        while time.monotonic() < deadline and hub.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code
            except httpx.HTTPError:
                status = None
            if status == 200:
                break
            time.sleep(0.5)
        assert status == 200, f"/healthz answered {status}\n{journal.read_text()[-3000:]}"
        assert (data / "logs" / "web.log").exists() and (data / "hub.sqlite3").exists()
        tree = _process_tree(hub.pid)
        assert len(tree) >= 6, tree  # up.py, redis, web, worker, beat, emulator (and their children)
        hub.send_signal(signal.SIGTERM)  # KillMode=mixed: the main process alone
        assert hub.wait(timeout=30) == 0, journal.read_text()[-3000:]  # within TimeoutStopSec
        time.sleep(0.5)
        assert not [pid for pid in tree if _alive(pid)]  # nothing left for systemd's SIGKILL
        assert "stopped at" in journal.read_text()
    finally:
        if hub.poll() is None:
            os.killpg(hub.pid, signal.SIGKILL)
            hub.wait()
        for pid in tree:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if not had_manifest:
            manifest.unlink(missing_ok=True)
