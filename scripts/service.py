#!/usr/bin/env python
"""`make install-service` / `make uninstall-service`: run the hub as a systemd service.

    scripts/service.py install [--system]     write the unit, then enable and start it
    scripts/service.py uninstall [--system]   stop and disable it, delete the unit
    scripts/service.py render [--system]      print the unit, change nothing

A **user unit** by default (``~/.config/systemd/user/tiiny-hub.service``, or under ``$XDG_CONFIG_HOME``): no root
needed, the hub runs as you. A user's services stop when they log out and do not start at boot unless lingering
is on (``loginctl enable-linger $USER``, said after installing). ``--system`` writes
``/etc/systemd/system/tiiny-hub.service`` instead (needs root: ``sudo``), started at boot by the system manager,
running as the user who asked (``$SUDO_USER`` under sudo).

The unit runs the same launcher as ``make up`` (``scripts/up.py``: migrations, Redis, web, worker, beat, the
emulator) from this checkout, with its ``.env``; it holds no secret itself (they stay in ``.env``, read by the
hub). When systemctl is missing or its manager is not running (a container, WSL, a session without a user
manager), the unit is still written and the commands to run later are printed; the exit status is then 1, since
nothing runs yet.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

BASE = Path(__file__).resolve().parent.parent
UNIT_NAME = "tiiny-hub.service"
SYSTEM_DIR = Path("/etc/systemd/system")


@dataclass(frozen=True)
class Plan:
    """Everything the unit names, found from this checkout and the environment."""

    checkout: Path
    data_dir: Path
    env_file: Path
    python: Path
    system: bool
    user: str


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of ``.env`` as the hub reads them (hub.env.load_env_file), without changing os.environ."""
    values: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return values
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values


def invoking_user() -> str:
    """Who the service runs as: the person behind sudo, else whoever runs this."""
    if os.geteuid() == 0 and os.environ.get("SUDO_USER"):
        return os.environ["SUDO_USER"]
    return pwd.getpwuid(os.geteuid()).pw_name


def make_plan(*, system: bool, checkout: Path = BASE, environ: dict[str, str] | None = None) -> Plan:
    environ = dict(os.environ if environ is None else environ)
    env_file = checkout / ".env"
    # The environment wins over .env, as in the hub; a relative folder is taken from the checkout (the unit's
    # WorkingDirectory), where `make up` would take it too.
    data = environ.get("HUB_DATA_DIR") or read_env_file(env_file).get("HUB_DATA_DIR") or "var"
    data_dir = Path(data).expanduser()
    if not data_dir.is_absolute():
        data_dir = checkout / data_dir
    return Plan(
        checkout=checkout,
        data_dir=data_dir,
        env_file=env_file,
        python=checkout / ".venv" / "bin" / "python",
        system=system,
        user=invoking_user(),
    )


def unit_dir(system: bool, environ: dict[str, str] | None = None) -> Path:
    if system:
        return SYSTEM_DIR
    environ = os.environ if environ is None else environ
    config = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(config) / "systemd" / "user"


def _value(text: str) -> str:
    """A unit file value: ``%`` starts a specifier, so it is doubled."""
    return text.replace("%", "%%")


def _arg(text: str) -> str:
    """One ExecStart argument: quoted when it has a space (systemd splits on whitespace, honours quotes)."""
    text = _value(text)
    if any(c.isspace() for c in text) or '"' in text or "\\" in text:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def render(plan: Plan) -> str:
    """The unit file's text."""
    checkout = plan.checkout
    lines = [
        "# Tiiny Hub, written by `make install-service` (scripts/service.py); `make uninstall-service` removes it.",
        "# Secrets are not in this file: the hub reads them from the environment file below (made by `make up`).",
        "[Unit]",
        "Description=Tiiny Hub (web, worker, beat; scripts/up.py)",
        f"Documentation=file://{_value(quote(str(checkout / 'docs' / 'deploy' / 'README.md')))}",
        # In a user manager the system's network-online.target is not visible and these two change nothing; a hub
        # that starts before the network binds 127.0.0.1 or 0.0.0.0 anyway, and a failed start is retried.
        "Wants=network-online.target",
        "After=network-online.target",
        # Ten failed starts in five minutes (a port taken, a broken .env) and systemd stops trying: see
        # `systemctl status`, fix, then `systemctl reset-failed` and start it.
        "StartLimitIntervalSec=300",
        "StartLimitBurst=10",
        "",
        "[Service]",
        "Type=exec",
    ]
    if plan.system:
        lines.append(f"User={plan.user}")
    lines += [
        f"WorkingDirectory={_value(str(checkout))}",
        f"Environment={_arg('HUB_DATA_DIR=' + str(plan.data_dir))}",
        "Environment=PYTHONUNBUFFERED=1",
        # up.py sets the same umask itself; here it also covers what systemd and Python make before it runs.
        "UMask=0077",
        # "-": the file may not exist before the first start (up.py writes the secrets into it then).
        f"EnvironmentFile=-{_value(str(plan.env_file))}",
        f"ExecStart={_arg(str(plan.python))} {_arg(str(checkout / 'scripts' / 'up.py'))}",
        # SIGTERM to up.py alone: it stops web, worker, beat and Redis itself (each gets SIGTERM, then SIGKILL
        # after 5 s) and exits 0. What is still left when it exits is killed by systemd.
        "KillMode=mixed",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=30",
        "Restart=on-failure",
        "RestartSec=5",
    ]
    if plan.system:
        lines.append("NoNewPrivileges=yes")
    lines += [
        "",
        "[Install]",
        f"WantedBy={'multi-user.target' if plan.system else 'default.target'}",
        "",
    ]
    return "\n".join(lines)


# -- systemctl ------------------------------------------------------------------------------------------------
def _systemctl(system: bool, *args: str) -> list[str]:
    return ["systemctl", *([] if system else ["--user"]), *args]


def run_systemctl(system: bool, *args: str) -> str | None:
    """Run one systemctl command; None when it worked, else why not (one line)."""
    cmd = _systemctl(system, *args)
    if shutil.which("systemctl") is None:
        return "systemctl is not installed here (no systemd)"
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`{' '.join(cmd)}` could not run: {exc}"
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        return f"`{' '.join(cmd)}` failed: {said[-1] if said else f'exit {result.returncode}'}"
    return None


def manager_missing(system: bool) -> str | None:
    """Why systemctl cannot talk to the manager here, or None when it can."""
    if shutil.which("systemctl") is None:
        return "systemctl is not installed here (no systemd)"
    if system and not Path("/run/systemd/system").is_dir():
        return "systemd is not running on this machine (it is not PID 1: a container or WSL?)"
    return None


def _shown(cmd: list[str]) -> str:
    return " ".join(cmd)


def port_in_use(plan: Plan) -> int | None:
    """The hub's port when something already listens on it (often `make up` in a terminal)."""
    env = {**read_env_file(plan.env_file), **os.environ}
    host = env.get("HUB_HOST") or "127.0.0.1"
    try:
        port = int(env.get("HUB_PORT") or 8000)
    except ValueError:
        return None
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.settimeout(0.5)
        target = (
            "127.0.0.1"
            if host in ("0.0.0.0", "")
            else ("::1" if host in ("::", "[::]") else host.strip("[]"))
        )
        return port if sock.connect_ex((target, port)) == 0 else None


def say(message: str) -> None:
    print(f"tiiny-hub: {message}", flush=True)


def install(plan: Plan, target: Path) -> int:
    if not plan.python.exists():
        say(f"{plan.python} is missing: run `make venv` (or `make up` once) first.")
        return 1
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(plan))
    except PermissionError:
        say(f"cannot write {target}: a system unit needs root (sudo make install-service SYSTEM=1)")
        return 1
    say(f"wrote {target}")
    say(f"  runs {plan.checkout / 'scripts' / 'up.py'} with {plan.env_file}; data in {plan.data_dir}")
    busy = port_in_use(plan)
    steps = [("daemon-reload",), ("enable", UNIT_NAME) if busy else ("enable", "--now", UNIT_NAME)]
    why = manager_missing(plan.system)
    for step in steps:
        if why:
            break
        why = run_systemctl(plan.system, *step)
    if why:
        say(f"the unit is written but not enabled: {why}.")
        say("Where systemd runs, enable and start it with:")
        for step in [("daemon-reload",), ("enable", "--now", UNIT_NAME)]:
            print(f"  {_shown(_systemctl(plan.system, *step))}")
        _linger_hint(plan)
        return 1
    if busy:
        say(
            f"enabled (starts at boot), not started: port {busy} is in use (is `make up` running? stop it first)"
        )
        print(f"  then: {_shown(_systemctl(plan.system, 'start', UNIT_NAME))}")
    else:
        say("enabled and started.")
    journal = "journalctl" + ("" if plan.system else " --user")
    print(f"  status: {_shown(_systemctl(plan.system, 'status', UNIT_NAME))}")
    print(f"  hub's own lines: {journal} -u {UNIT_NAME} -f   ·   each process's log: make logs")
    _linger_hint(plan)
    return 0


def _linger_hint(plan: Plan) -> None:
    if not plan.system:
        print(
            "  A user service stops when you log out and does not start at boot unless lingering is on:\n"
            f"    loginctl enable-linger {plan.user}"
        )


def uninstall(plan: Plan, target: Path) -> int:
    why = manager_missing(plan.system)
    if not why and target.exists():
        why = run_systemctl(plan.system, "disable", "--now", UNIT_NAME)
    # What `disable` removes, removed by hand when systemctl could not run (an install made without systemd).
    wanted_by = "multi-user.target" if plan.system else "default.target"
    (target.parent / f"{wanted_by}.wants" / UNIT_NAME).unlink(missing_ok=True)
    try:
        existed = target.exists()
        target.unlink(missing_ok=True)
    except PermissionError:
        say(f"cannot remove {target}: a system unit needs root (sudo make uninstall-service SYSTEM=1)")
        return 1
    if not why:
        why = run_systemctl(plan.system, "daemon-reload")
    say(f"removed {target}" if existed else f"no unit at {target}; nothing to remove")
    if why and existed:
        say(f"systemd was not told: {why}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the hub as a systemd service.")
    parser.add_argument("action", choices=("install", "uninstall", "render"))
    parser.add_argument(
        "--system",
        action="store_true",
        help="a system unit in /etc/systemd/system (needs root), not a user unit",
    )
    args = parser.parse_args(argv)
    plan = make_plan(system=args.system)
    target = unit_dir(args.system) / UNIT_NAME
    if args.action == "render":
        sys.stdout.write(render(plan))
        return 0
    if args.action == "install":
        return install(plan, target)
    return uninstall(plan, target)


if __name__ == "__main__":
    sys.exit(main())
