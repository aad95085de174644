"""HUB_MEDIA_STORAGE (hub.media_storage): the local folder by default, an S3 bucket when it names one, and one clear
line for anything wrong, at start-up (a real ``manage.py check``, as every setting is checked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub import media_storage
from hub.env import SettingError

ROOT = Path(__file__).resolve().parent.parent.parent
KEYS = {"AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk"}


@pytest.mark.parametrize("value", [None, "", "file:", " file: "])
def test_unset_or_file_is_the_local_folder(value):
    store, setting = media_storage.from_env({} if value is None else {"HUB_MEDIA_STORAGE": value})
    assert not store.remote
    assert setting == {"BACKEND": "django.core.files.storage.FileSystemStorage"}


def test_a_bucket_url_becomes_django_storages_s3():
    env = {
        "HUB_MEDIA_STORAGE": "s3://hub-media/tiiny/results?endpoint=https://s3.example.lan:9000/&region=eu-west-1"
    }
    store, setting = media_storage.from_env({**env, **KEYS})
    assert (store.bucket, store.prefix, store.endpoint, store.region) == (
        "hub-media",
        "tiiny/results",
        "https://s3.example.lan:9000",
        "eu-west-1",
    )
    assert setting["BACKEND"] == "storages.backends.s3.S3Storage"
    options = setting["OPTIONS"]
    assert options["bucket_name"] == "hub-media" and options["location"] == "tiiny/results"
    assert (options["access_key"], options["secret_key"]) == ("ak", "sk")
    assert options["querystring_expire"] == 60
    assert options["client_config"].s3 == {"addressing_style": "path"}
    assert store.url() == "s3://hub-media/tiiny/results?endpoint=https://s3.example.lan:9000&region=eu-west-1"


def test_keys_can_come_from_files(tmp_path):
    (tmp_path / "id").write_text("from-file\n")
    (tmp_path / "secret").write_text("  secret-from-file ")
    env = {
        "HUB_MEDIA_STORAGE": "s3://bucket",
        "AWS_ACCESS_KEY_ID_FILE": str(tmp_path / "id"),
        "AWS_SECRET_ACCESS_KEY_FILE": str(tmp_path / "secret"),
    }
    options = media_storage.from_env(env)[1]["OPTIONS"]
    assert (options["access_key"], options["secret_key"]) == ("from-file", "secret-from-file")


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"HUB_MEDIA_STORAGE": "ftp://bucket"}, "unknown store"),
        ({"HUB_MEDIA_STORAGE": "s3://"}, "names no bucket"),
        ({"HUB_MEDIA_STORAGE": "s3:///prefix"}, "names no bucket"),
        ({"HUB_MEDIA_STORAGE": "s3://Not_A_Bucket!"}, "is not a bucket name"),
        ({"HUB_MEDIA_STORAGE": "s3://bucket?endpoint=s3.example.lan"}, "is not an http:// or https:// URL"),
        (
            {"HUB_MEDIA_STORAGE": "s3://bucket?endpoint=https://host:99999"},
            "is not an http:// or https:// URL",
        ),
        ({"HUB_MEDIA_STORAGE": "s3://bucket?endpoint=https://"}, "is not an http:// or https:// URL"),
        ({"HUB_MEDIA_STORAGE": "s3://bucket?acl=public"}, "unknown option 'acl'"),
        ({"HUB_MEDIA_STORAGE": "s3://bucket?region=EU WEST"}, "is not a region name"),
        ({"HUB_MEDIA_STORAGE": "s3://ak:sk@bucket"}, "keys never go in the URL"),
        ({"HUB_MEDIA_STORAGE": "s3://bucket"}, "AWS_ACCESS_KEY_ID (or AWS_ACCESS_KEY_ID_FILE) is not set"),
        (
            {"HUB_MEDIA_STORAGE": "s3://bucket", "AWS_ACCESS_KEY_ID": "ak"},
            "AWS_SECRET_ACCESS_KEY (or AWS_SECRET_ACCESS_KEY_FILE) is not set",
        ),
        (
            {"HUB_MEDIA_STORAGE": "s3://bucket", **KEYS, "AWS_ACCESS_KEY_ID_FILE": "/x"},
            "AWS_ACCESS_KEY_ID and AWS_ACCESS_KEY_ID_FILE are both set",
        ),
        (
            {
                "HUB_MEDIA_STORAGE": "s3://bucket",
                "AWS_ACCESS_KEY_ID": "a",
                "AWS_SECRET_ACCESS_KEY_FILE": "/nope/x",
            },
            "AWS_SECRET_ACCESS_KEY_FILE='/nope/x' can't be read",
        ),
    ],
)
def test_a_wrong_value_is_one_line_naming_the_variable(env, words):
    with pytest.raises(SettingError) as caught:
        media_storage.from_env(env)
    message = str(caught.value)
    assert words in message and "\n" not in message
    assert "HUB_MEDIA_STORAGE" in message or "AWS_" in message


def _check(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HUB_MEDIA"))}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_start_up_stops_on_a_wrong_store_with_one_line_and_runs_on_a_right_one():
    bad = _check({"HUB_MEDIA_STORAGE": "s3://hub-media?endpoint=http://127.0.0.1:9000"})
    assert bad.returncode != 0
    assert "Traceback" not in bad.stderr
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert lines == [
        "tiiny-hub: configuration error: HUB_MEDIA_STORAGE names a bucket but AWS_ACCESS_KEY_ID "
        "(or AWS_ACCESS_KEY_ID_FILE) is not set"
    ]
    good = _check({"HUB_MEDIA_STORAGE": "s3://hub-media?endpoint=http://127.0.0.1:9000", **KEYS})
    assert good.returncode == 0, good.stderr


def test_the_moto_store_saves_reads_and_deletes_through_django_storage(s3_store):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    assert default_storage.__class__.__name__ == "S3Storage"
    default_storage.save("results/1/2/a.txt", ContentFile(b"hello"))
    assert s3_store.keys() == ["results/1/2/a.txt"]
    assert s3_store.get("results/1/2/a.txt") == b"hello"
    with default_storage.open("results/1/2/a.txt", "rb") as fh:
        assert fh.read() == b"hello"
    default_storage.delete("results/1/2/a.txt")
    assert s3_store.keys() == []
