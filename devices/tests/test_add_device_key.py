"""Device keys stay off the command line: add_device reads a file, the environment or a prompt; `make up`
hands the emulator its key in the environment; the emulator reads a file or the environment."""

from __future__ import annotations

import importlib.util
import os
import sys
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from devices.emulator.testing import _spawn, _terminate, free_port
from devices.models import Device

pytestmark = pytest.mark.django_db
SECRET = "k3y-that-must-not-show-9f2c"


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("add_device", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def key_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "tiiny.key"
    path.write_text(text)
    path.chmod(mode)
    return path


BASE_ARGS = ("--name", "Pocket", "--kind", "tiiny")


# --- add_device -------------------------------------------------------------------------------------------
def test_it_reads_the_key_from_a_file_and_checks_the_device(tiiny, tmp_path):
    path = key_file(tmp_path, f"{tiiny.api_key}\n")
    out, err = run(*BASE_ARGS, "--url", tiiny.base_url, "--api-key-file", str(path))
    assert out.startswith("Pocket: added, connected (") and err == ""
    assert Device.objects.get().api_key == tiiny.api_key


def test_it_reads_the_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("HUB_DEVICE_API_KEY", f" {SECRET} ")
    out, err = run(*BASE_ARGS, "--url", "http://127.0.0.1:9", "--no-check")
    assert Device.objects.get().api_key == SECRET
    assert SECRET not in out + err and err == ""


class _Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def test_it_prompts_without_echo_on_a_terminal(monkeypatch):
    monkeypatch.delenv("HUB_DEVICE_API_KEY", raising=False)
    prompts = []
    monkeypatch.setattr(sys, "stdin", _Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or SECRET)
    run(*BASE_ARGS, "--url", "http://127.0.0.1:9", "--no-check")
    assert prompts == ["API key for Pocket (input hidden; empty for none): "]
    assert Device.objects.get().api_key == SECRET


def test_it_does_not_prompt_without_a_terminal_or_for_an_existing_device(monkeypatch):
    monkeypatch.delenv("HUB_DEVICE_API_KEY", raising=False)
    monkeypatch.setattr("getpass.getpass", lambda prompt: pytest.fail("prompted"))
    run(*BASE_ARGS, "--url", "http://127.0.0.1:9", "--no-check")  # pytest's stdin is no terminal
    assert not Device.objects.get().has_api_key
    device = Device.objects.get()
    device.api_key = SECRET
    device.save()
    monkeypatch.setattr(sys, "stdin", _Terminal())
    out, _ = run(*BASE_ARGS, "--url", "http://127.0.0.1:10", "--no-check")
    assert out.startswith("Pocket: updated") and Device.objects.get().api_key == SECRET  # kept


def test_the_flag_still_works_with_a_warning(monkeypatch):
    out, err = run(*BASE_ARGS, "--url", "http://127.0.0.1:9", "--no-check", "--api-key", SECRET)
    assert Device.objects.get().api_key == SECRET
    assert err.startswith("warning: --api-key puts the key on the command line") and "--api-key-file" in err
    assert SECRET not in out + err


def test_the_flag_reads_stdin_with_a_dash(monkeypatch):
    monkeypatch.setattr(sys, "stdin", StringIO(SECRET + "\n"))
    _, err = run(*BASE_ARGS, "--url", "http://127.0.0.1:9", "--no-check", "--api-key", "-")
    assert Device.objects.get().api_key == SECRET and err == ""


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: ["--api-key-file", str(p / "missing.key")], "No such file or directory"),
        (lambda p: ["--api-key-file", str(key_file(p, "\n\n"))], "is empty"),
        (lambda p: ["--api-key-file", str(key_file(p, "a")), "--api-key", "b"], "not both"),
    ],
)
def test_bad_key_sources_get_one_line(tmp_path, setup, message):
    with pytest.raises(CommandError) as info:
        run(*BASE_ARGS, "--url", "http://127.0.0.1:9", "--no-check", *setup(tmp_path))
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not Device.objects.exists()


def test_a_key_file_others_can_read_gets_a_warning(tmp_path):
    path = key_file(tmp_path, SECRET, mode=0o644)
    _, err = run(*BASE_ARGS, "--url", "http://127.0.0.1:9", "--no-check", "--api-key-file", str(path))
    assert "readable by other users" in err and f"chmod 600 {path}" in err and SECRET not in err
    assert Device.objects.get().api_key == SECRET


# --- make up ----------------------------------------------------------------------------------------------
def _load_up():
    spec = importlib.util.spec_from_file_location(
        "hub_up_script", Path(settings.BASE_DIR) / "scripts" / "up.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_up_passes_the_emulator_key_in_the_environment_only(monkeypatch, tmp_path):
    up = _load_up()
    monkeypatch.setenv("HUB_EMULATOR_API_KEY", SECRET)
    monkeypatch.setenv("HUB_EMULATOR_PORT", str(free_port()))
    calls = []
    monkeypatch.setattr(up, "manage", lambda *args, **kw: calls.append((args, kw.get("env") or {})) or "")

    class Manager:
        processes = []

        def add_process(self, name, cmd, env=None):
            self.processes.append((name, cmd, env or {}))

    manager = Manager()
    up.add_emulator(manager, dict(os.environ), tmp_path)
    [(name, cmd, env)] = manager.processes
    assert name == "emulator" and SECRET not in cmd and "--api-key" not in cmd
    assert env["HUB_EMULATOR_API_KEY"] == SECRET
    [(args, add_env)] = calls
    assert args[0] == "add_device" and SECRET not in " ".join(args) and "--api-key" not in args
    assert add_env["HUB_DEVICE_API_KEY"] == SECRET


# --- the emulator ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["environment", "file"])
def test_the_emulator_takes_its_key_without_showing_it_in_its_command_line(tmp_path, source):
    port = free_port()
    args = ["tiiny", "--port", str(port), "--discovery-port", "off", "--udp-port", "off"]
    env = {"HUB_EMULATOR_API_KEY": ""}
    if source == "environment":
        env["HUB_EMULATOR_API_KEY"] = SECRET
    else:
        args += ["--api-key-file", str(key_file(tmp_path, f"{SECRET}\n"))]
    emulator = _spawn(args, base_url=f"http://127.0.0.1:{port}", api_key=SECRET, env=env)
    try:
        cmdline = Path(f"/proc/{emulator.process.pid}/cmdline").read_bytes()  # what `ps` shows everyone
        assert SECRET.encode() not in cmdline
        url = f"http://127.0.0.1:{port}/api/v1/sys/status"
        assert httpx.get(url, headers={"Authorization": f"Bearer {SECRET}"}).status_code == 200
        assert httpx.get(url, headers={"Authorization": "Bearer test-key"}).status_code == 401
    finally:
        _terminate(emulator.process)
