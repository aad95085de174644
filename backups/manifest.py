"""``manifest.json``: what a backup holds, so a restore can tell a whole backup from a damaged one and a backup
this checkout can read from one made by a newer hub.

It records the hub's version and commit, the database vendor and its file (size, sha256), the migrations applied
per app, the row count of every model, every result file (name, size, sha256, modification time), when the
backup was taken, and whether the secret key is beside it (never the key itself: only a fingerprint, so a restore
can say that this hub's key differs and sealed secrets will not open).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from django.db.migrations.loader import MigrationLoader

from backups import files as backup_files

MANIFEST = "manifest.json"
FORMAT = 1
REQUIRED = ("format", "hub_version", "created", "vendor", "database", "migrations", "counts", "files")


class ManifestError(Exception):
    """A damaged or unreadable backup; ``str()`` is one line naming what is wrong."""


def secret_fingerprint(key: str) -> str:
    """12 hex digits that tell two secret keys apart without revealing either."""
    return hashlib.sha256(f"tiiny-hub-backup:{key}".encode()).hexdigest()[:12]


def write(folder: Path, manifest: dict) -> None:
    """Write ``manifest.json`` (fsynced) into the backup's folder, still under its temporary name."""
    path = folder / MANIFEST
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def read(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{folder.name}: no {MANIFEST} (not a finished backup)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{folder.name}: {MANIFEST} is damaged ({exc})") from None
    if not isinstance(data, dict) or (missing := [k for k in REQUIRED if k not in data]):
        what = ", ".join(missing) if isinstance(data, dict) else "not an object"
        raise ManifestError(f"{folder.name}: {MANIFEST} is damaged (missing: {what})")
    if data["format"] != FORMAT:
        raise ManifestError(
            f"{folder.name}: manifest format {data['format']} is not one this hub reads ({FORMAT})"
        )
    return data


def _check(folder: Path, name: str, size: int, sha256: str, what: str) -> None:
    path = folder / name
    try:
        actual = path.stat().st_size
    except OSError:
        raise ManifestError(f"{folder.name}: {what} {name} is missing") from None
    if actual != size:
        raise ManifestError(f"{folder.name}: {what} {name} is {actual} bytes, the manifest says {size}")
    if backup_files.sha256_of(path) != sha256:
        raise ManifestError(f"{folder.name}: {what} {name} has the wrong sha256 (damaged)")


def verify(folder: Path, manifest: dict) -> None:
    """Every file the manifest lists is there with its size and sha256 (ManifestError on the first that isn't)."""
    db = manifest["database"]
    try:
        _check(folder, db["file"], db["size"], db["sha256"], "database file")
        for entry in manifest["files"]:
            _check(
                folder, f"{backup_files.FILES_DIR}/{entry['name']}", entry["size"], entry["sha256"], "file"
            )
    except (KeyError, TypeError) as exc:
        raise ManifestError(f"{folder.name}: {MANIFEST} is damaged (bad entry: {exc})") from None


def unknown_migrations(manifest: dict) -> list[str]:
    """The migrations the backup's database has that this checkout does not know (a backup from a newer hub)."""
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    return [
        f"{app}.{name}"
        for app, names in sorted(manifest["migrations"].items())
        for name in names
        if (app, name) not in known
    ]
