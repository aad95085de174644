"""Command-line plumbing shared by ``python -m devices.emulator tiiny`` and ``manage.py emulate_tiiny``."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from devices.emulator.quirks import ALL_QUIRKS, UnknownQuirk, parse_quirks
from devices.emulator.tiiny_state import Options

KEY_ENV = "HUB_EMULATOR_API_KEY"  # the accepted key when no flag gives one (how `make up` passes it)


def _port_or_off(value: str) -> int | None:
    """'off'/'none'/'-1' disables a discovery listener; 0 binds an ephemeral port."""
    if value.lower() in ("off", "none", "-1", "disabled"):
        return None
    return int(value)


def add_tiiny_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address for the API and discovery (default loopback)"
    )
    parser.add_argument("--port", type=int, default=8800, help="API port (default 8800)")
    parser.add_argument(
        "--speed",
        type=float,
        default=60.0,
        help="device seconds per real second (60: a 7-minute render takes 7 s)",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        dest="api_keys",
        metavar="KEY",
        help="accepted Bearer key (repeatable). Visible in `ps`: prefer --api-key-file or "
        f"${KEY_ENV}. Default without any of them: test-key",
    )
    parser.add_argument(
        "--api-key-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="read the accepted key(s) from this file, one per line",
    )
    parser.add_argument(
        "--quirks",
        default="all",
        help=f"all | none | comma list, '-name' removes one (known: {', '.join(ALL_QUIRKS)})",
    )
    parser.add_argument("--locked", action="store_true", help="start locked (every call 502 until unlocked)")
    parser.add_argument(
        "--discovery-port",
        type=_port_or_off,
        default=39218,
        help="device.json HTTP port; 0 = ephemeral, off = disabled (default 39218)",
    )
    parser.add_argument(
        "--udp-port",
        type=_port_or_off,
        default=39217,
        help="GADGET_DISCOVER_V1 UDP port; 0 = ephemeral, off = disabled (default 39217)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="keep finished video jobs and the media cache here (they survive restarts)",
    )
    parser.add_argument("--device-name", default="Tiiny Emulator")
    parser.add_argument("--log-level", default="warning")


def api_keys_from(ns: argparse.Namespace, environ=os.environ) -> tuple[str, ...]:
    """--api-key, then --api-key-file, then $HUB_EMULATOR_API_KEY, else the test key.

    ``make up`` uses the environment: a key on the command line is readable by every local user
    through ``ps`` and /proc/<pid>/cmdline.
    """
    keys = list(getattr(ns, "api_keys", None) or [])
    path = getattr(ns, "api_key_file", None)
    if path is not None:
        try:
            keys += [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
        except OSError as exc:
            raise SystemExit(f"--api-key-file {path}: {exc.strerror or exc}") from None
    if not keys and environ.get(KEY_ENV, "").strip():
        keys = [environ[KEY_ENV].strip()]
    return tuple(keys or ["test-key"])


def options_from_args(ns: argparse.Namespace) -> Options:
    try:
        quirks = parse_quirks(ns.quirks)
    except UnknownQuirk as exc:
        raise SystemExit(str(exc)) from exc
    return Options(
        api_keys=api_keys_from(ns),
        host=ns.host,
        port=ns.port,
        speed=ns.speed,
        quirks=frozenset(quirks),
        locked=ns.locked,
        discovery_port=ns.discovery_port,
        udp_port=ns.udp_port,
        data_dir=ns.data_dir,
        device_name=ns.device_name,
    )


def serve_tiiny(options: Options, *, log_level: str = "warning") -> None:
    """Run the emulator until SIGINT/SIGTERM."""
    import os

    import uvicorn

    from devices.emulator.tiiny import create_app

    if options.data_dir is not None:
        # The emulator keeps people's prompts, inputs and results as a device would: its owner's alone, like the
        # hub's data folder it lives in (hub.atrest), also when started by hand from a shell with a wider umask.
        os.umask(0o077)
        options.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # media.py caches rendered files under EMULATOR_MEDIA_CACHE; keep them with the device's data.
        os.environ.setdefault("EMULATOR_MEDIA_CACHE", str(options.data_dir / "media"))
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = uvicorn.Config(
        create_app(options),
        host=options.host,
        port=options.port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    print(f"Tiiny emulator on http://{options.host}:{options.port} speed={options.speed:g}", flush=True)
    uvicorn.Server(config).run()


def run_tiiny_cli(ns: argparse.Namespace) -> None:
    serve_tiiny(options_from_args(ns), log_level=ns.log_level)
