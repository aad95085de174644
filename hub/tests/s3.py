"""A real S3 API on loopback for the tests: moto's server (``moto.server.ThreadedMotoServer``), started once per
pytest process (each xdist worker has its own, like its private Redis) on a free port, the first time a test asks.

``s3_store`` points ``STORAGES["default"]`` at a fresh bucket for one test (Django's ``setting_changed`` resets
``default_storage`` and ``storages``) and gives what a process started by the test (web server, worker) needs to use
the same bucket: ``s3_store.env``. ``moto_server()`` starts a server of the test's own, to stop mid-save.
"""

from __future__ import annotations

import logging
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from hub import media_storage

KEY, SECRET, REGION = "hub-test-key", "hub-test-secret", "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MotoServer:
    """One moto server on 127.0.0.1; ``stop()`` closes its port (a store that went away)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.running = False
        self.start()

    def start(self) -> None:
        """Start (again, on the same port: moto keeps its buckets in this process, so a restart finds them)."""
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        self.running = True

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name=REGION,
        )

    def stop(self) -> None:
        if self.running:
            self._server.stop()
            self.running = False


@dataclass
class S3Store:
    """A bucket on a moto server, and the settings and environment that name it."""

    server: MotoServer
    bucket: str
    prefix: str = "media"
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.url = f"s3://{self.bucket}/{self.prefix}?endpoint={self.server.endpoint}&region={REGION}"
        self.env = {"HUB_MEDIA_STORAGE": self.url, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
        self.setting = media_storage.from_env(self.env)[1]

    @property
    def client(self) -> Any:
        return self.server.client()

    def keys(self) -> list[str]:
        """Every object's key in the bucket, without the prefix."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        cut = len(self.prefix) + 1
        return sorted(obj["Key"][cut:] for page in pages for obj in page.get("Contents", []))

    def get(self, name: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{name}")["Body"].read()

    def empty(self) -> None:
        for name in self.keys():
            self.client.delete_object(Bucket=self.bucket, Key=f"{self.prefix}/{name}")


def new_bucket(server: MotoServer) -> S3Store:
    bucket = f"hub-test-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=bucket)
    return S3Store(server, bucket)


@pytest.fixture(scope="session")
def moto_s3():
    """This pytest process's moto server."""
    server = MotoServer()
    yield server
    server.stop()


@pytest.fixture
def moto_server():
    """A moto server of the test's own (``.stop()`` it to lose the store); stopped at the end."""
    servers: list[MotoServer] = []

    def start() -> MotoServer:
        servers.append(MotoServer())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def use_store(settings, setting: dict[str, Any]) -> None:
    """Point ``STORAGES["default"]`` at ``setting`` (pytest-django's ``settings`` puts it back after the test)."""
    settings.STORAGES = {**settings.STORAGES, "default": setting}


@pytest.fixture
def s3_store(moto_s3, settings):
    """``STORAGES["default"]`` is a fresh bucket on the moto server for this test; ``.env`` names it for a process
    the test starts."""
    store = new_bucket(moto_s3)
    use_store(settings, store.setting)
    yield store
    if moto_s3.running:
        store.empty()
