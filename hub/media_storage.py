"""Where the hub keeps its files (results, inputs, thumbnails, previews): ``HUB_MEDIA_STORAGE``, read in one place.

- unset, empty or ``file:``: the local folder ``MEDIA_ROOT`` (``<HUB_DATA_DIR>/media``), as a household's hub has
  always done;
- ``s3://bucket/prefix?endpoint=https://host:port&region=eu-west-1``: an S3-compatible bucket through
  django-storages' ``S3Storage``. ``prefix`` (optional) is the folder inside the bucket; ``endpoint`` (optional:
  AWS itself without it) is the S3 API's base URL (MinIO, Garage, Ceph, a cloud's S3 API); ``region`` is optional.
  The keys come from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, or from the files named by
  ``AWS_ACCESS_KEY_ID_FILE`` / ``AWS_SECRET_ACCESS_KEY_FILE`` (a Docker or systemd secret), never from the URL or
  the command line, where ``ps`` and shell histories would show them.

A wrong value stops start-up with one :class:`~hub.env.SettingError` line naming the variable: an unknown scheme,
no bucket, a malformed endpoint, keys missing or in the URL. Whether the endpoint answers is not known at start-up
(the store may come up after the hub): ``/healthz`` reports it (``hub.health``), and a result saved while it is
unreachable waits and is tried again (``jobs.queue``), like a full disk.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from hub.env import SettingError

VAR = "HUB_MEDIA_STORAGE"
S3_BACKEND = "storages.backends.s3.S3Storage"
FILE_BACKEND = "django.core.files.storage.FileSystemStorage"
KEY_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
#: A presigned URL (``storage.url()``) lives one minute: long enough to start a download, short enough that a
#: link handed out before a share was revoked stops soon (the hub streams by default: jobs.files.downloads).
PRESIGNED_S = 60
#: Connections to the store: a dead endpoint is found in seconds, not minutes; botocore retries a few times.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
RETRIES = 3
# S3's bucket rules (3-63 of a-z 0-9 . -, starting and ending with a letter or digit); a bit wider for MinIO.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-_]{1,61}[a-z0-9]$")
_REGION = re.compile(r"^[a-z0-9-]{1,40}$")


#: The words for a store that can't be reached, wherever the hub says so (job story, health, a download's 503).
UNREACHABLE = "the result store is unreachable"


class StoreUnreachable(OSError):
    """The store did not answer, or answered with an error of its own (5xx, refused keys, no bucket): what was
    being saved or read is not lost, and the same call can be tried again later (``hub.disk.is_save_blocked``)."""


@dataclass(frozen=True)
class MediaStorage:
    """What ``HUB_MEDIA_STORAGE`` names: the local folder (``scheme == "file"``) or a bucket."""

    scheme: str
    bucket: str = ""
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None

    @property
    def remote(self) -> bool:
        return self.scheme == "s3"

    def url(self) -> str:
        """The value that names this store (no secret: keys never go in it)."""
        if not self.remote:
            return "file:"
        query = "&".join(f"{k}={v}" for k, v in (("endpoint", self.endpoint), ("region", self.region)) if v)
        path = f"/{self.prefix}" if self.prefix else ""
        return f"s3://{self.bucket}{path}" + (f"?{query}" if query else "")


def parse(value: str | None, *, name: str = VAR) -> MediaStorage:
    """The store ``value`` names; :class:`SettingError` (one line naming ``name``) for anything malformed."""
    value = (value or "").strip()
    if value in ("", "file:", "file://", "local"):
        return MediaStorage("file")
    parts = urlsplit(value)
    if parts.scheme != "s3":
        raise SettingError(
            f"{name}={value!r}: unknown store (use file: for the local folder, or "
            "s3://bucket/prefix?endpoint=https://host&region=name)"
        )
    if "@" in parts.netloc:
        raise SettingError(
            f"{name}: keys never go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or AWS_ACCESS_KEY_ID_FILE / AWS_SECRET_ACCESS_KEY_FILE)"
        )
    bucket = parts.netloc
    if not bucket:
        raise SettingError(f"{name}={value!r} names no bucket (s3://bucket/prefix?endpoint=...)")
    if not _BUCKET.match(bucket):
        raise SettingError(f"{name}: {bucket!r} is not a bucket name (3-63 of a-z, 0-9, '.', '-')")
    prefix = parts.path.strip("/")
    if ".." in prefix.split("/") or "//" in prefix:
        raise SettingError(f"{name}: the prefix {prefix!r} must be a plain folder name (a/b/c)")
    query = _query(parts.query, value, name)
    endpoint = _endpoint(query.get("endpoint"), name)
    region = query.get("region") or None
    if region is not None and not _REGION.match(region):
        raise SettingError(f"{name}: region={region!r} is not a region name (such as eu-west-1)")
    return MediaStorage("s3", bucket=bucket, prefix=prefix, endpoint=endpoint, region=region)


def _query(query: str, value: str, name: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise SettingError(f"{name}={value!r}: the part after ? must be endpoint=...&region=...") from None
    unknown = sorted({k for k, _v in pairs} - {"endpoint", "region"})
    if unknown:
        raise SettingError(f"{name}: unknown option {unknown[0]!r} (only endpoint= and region=)")
    return dict(pairs)


def _endpoint(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or port == -1
        or parts.query
        or "@" in value
    ):
        raise SettingError(
            f"{name}: endpoint={value!r} is not an http:// or https:// URL (https://host:port)"
        )
    return value.rstrip("/")


def read_key(name: str, environ: Mapping[str, str]) -> str:
    """The secret in ``name``, or in the file named by ``<name>_FILE`` (one of them; whitespace trimmed)."""
    direct, file_var = environ.get(name, "").strip(), f"{name}_FILE"
    named = environ.get(file_var, "").strip()
    if direct and named:
        raise SettingError(f"{name} and {file_var} are both set; keep one")
    if direct:
        return direct
    if not named:
        raise SettingError(f"{VAR} names a bucket but {name} (or {file_var}) is not set")
    try:
        secret = Path(named).expanduser().read_text().strip()
    except OSError as exc:
        raise SettingError(f"{file_var}={named!r} can't be read ({exc.strerror or exc})") from None
    if not secret:
        raise SettingError(f"{file_var}={named!r} is empty")
    return secret


def storage_setting(store: MediaStorage, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``STORAGES["default"]`` for ``store`` (the keys read from ``environ``, os.environ by default)."""
    if not store.remote:
        return {"BACKEND": FILE_BACKEND}
    environ = os.environ if environ is None else environ
    access, secret = (read_key(var, environ) for var in KEY_VARS)
    from botocore.config import Config  # reason: only a hub with a bucket needs botocore loaded

    options: dict[str, Any] = {
        "bucket_name": store.bucket,
        "location": store.prefix,
        "access_key": access,
        "secret_key": secret,
        "region_name": store.region,
        "endpoint_url": store.endpoint,
        # The hub names every file itself (results/<owner>/<job>/...) and replaces it in place.
        "file_overwrite": True,
        "default_acl": None,
        "querystring_expire": PRESIGNED_S,
        "signature_version": "s3v4",
        # A file read whole (S3File) spills to a temporary file past 4 MB instead of memory.
        "max_memory_size": 4 * 1024 * 1024,
        "client_config": Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"max_attempts": RETRIES, "mode": "standard"},
            # An endpoint (MinIO, a test server on 127.0.0.1) answers by path; AWS itself by virtual host.
            s3={"addressing_style": "path" if store.endpoint else "auto"},
        ),
    }
    return {"BACKEND": S3_BACKEND, "OPTIONS": options}


def from_env(environ: Mapping[str, str] | None = None) -> tuple[MediaStorage, dict[str, Any]]:
    """(the store, its ``STORAGES["default"]``) from ``HUB_MEDIA_STORAGE`` and the key variables."""
    environ = os.environ if environ is None else environ
    store = parse(environ.get(VAR))
    return store, storage_setting(store, environ)


def describe(storage: Any) -> str:
    """Where ``storage`` keeps files, in the words of ``HUB_MEDIA_STORAGE`` (no key): ``file:`` or ``s3://...``."""
    bucket = getattr(storage, "bucket_name", None)
    if not bucket:
        return "file:"
    named = MediaStorage(
        "s3",
        bucket=bucket,
        prefix=getattr(storage, "location", "") or "",
        endpoint=getattr(storage, "endpoint_url", None),
        region=getattr(storage, "region_name", None),
    )
    return named.url()


# -- is it there? (/healthz) --------------------------------------------------------------------------------------
#: The health probe's own client: it answers in about a second, whatever the store does.
PROBE_CONNECT_S = 1.0
PROBE_READ_S = 2.0


@functools.lru_cache(maxsize=4)
def _probe_client(endpoint: str | None, region: str | None, access: str, secret: str) -> Any:
    import boto3  # reason: only a hub with a bucket needs boto3 loaded
    from botocore.config import Config  # reason: as above

    config = Config(
        connect_timeout=PROBE_CONNECT_S,
        read_timeout=PROBE_READ_S,
        retries={"max_attempts": 1, "mode": "standard"},
        s3={"addressing_style": "path" if endpoint else "auto"},
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        config=config,
    )


def probe(storage: Any) -> tuple[bool, str]:
    """(ok, words) for the store ``storage`` is: one HEAD of the bucket (about a second at worst), or the local
    folder's path (its free space is the disk check's)."""
    bucket = getattr(storage, "bucket_name", None)
    if not bucket:
        location = getattr(storage, "location", "")
        return True, f"the local folder {location} (its free space: the disk check)"
    where = f"s3://{bucket}/{getattr(storage, 'location', '')}".rstrip("/")
    endpoint = getattr(storage, "endpoint_url", None)
    at = f" at {endpoint}" if endpoint else ""
    try:
        client = _probe_client(endpoint, storage.region_name, storage.access_key, storage.secret_key)
        client.head_bucket(Bucket=bucket)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        status = getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        why = {404: "no such bucket", 403: "the keys are refused"}.get(status, f"{type(exc).__name__}: {exc}")
        return False, f"{UNREACHABLE}: {where}{at}: {why}"
    return True, f"{where}{at} answers"
