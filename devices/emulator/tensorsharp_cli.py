"""`python -m devices.emulator tensorsharp ...`: run the TensorSharp.Server.Host emulator under uvicorn."""

from __future__ import annotations

import argparse
import pathlib

from devices.emulator.tensorsharp import MODELS


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register the `tensorsharp` subcommand on the emulator CLI's subparsers."""
    parser = subparsers.add_parser(
        "tensorsharp",
        help="emulate TensorSharp.Server.Host serving a video or image-edit model",
        description="Emulate TensorSharp.Server.Host (no auth) hosting one model; time scaled by --speed.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="HTTP port (default 5000, as the real host)")
    parser.add_argument("--speed", type=float, default=60, help="time scale: device seconds per wall second")
    parser.add_argument("--model", choices=sorted(MODELS), default="minimax-h3", help="the hosted model")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None, help="upload directory root")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from devices.emulator.tensorsharp import create_app

    app = create_app(model=args.model, speed=args.speed, data_dir=args.data_dir)
    # One worker: the render lock is process-wide, exactly like the real host.
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (used until/unless the shared `devices.emulator` CLI dispatches here)."""
    parser = argparse.ArgumentParser(prog="tensorsharp-emulator")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
