"""Small polling helpers shared by the Tiiny emulator conformance tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
HUNYUAN = "tencent/Hunyuan3D-2.1"
FOUNDATION = "RoyalCities/Foundation-1"
SONGGEN = "tencent/SongGeneration-v2-large"
ZIMAGE = "Tongyi-MAI/Z-Image-Turbo"
CHAT = "Qwen/Qwen3.6-35B-A3B-turbo"
CUSTOM_VOICE = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
MOSS = "OpenMOSS/MOSS-TTS-Nano-100M"
SUPERTONIC = "Supertone/supertonic-3"


def wait_for(
    fn: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.01, what: str = "condition"
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def running_ids(client: httpx.Client) -> list[str]:
    return client.get("/api/v1/models/running").json()["running"]


def wait_running(client: httpx.Client, model_id: str) -> None:
    wait_for(lambda: model_id in running_ids(client), what=f"{model_id} running")


def wait_video(
    client: httpx.Client, video_id: str, statuses: tuple[str, ...] = ("completed", "failed")
) -> dict:
    def poll() -> dict[str, Any] | None:
        body = client.get(f"/v1/videos/{video_id}").json()
        return body if body.get("status") in statuses else None

    return wait_for(poll, timeout=60, what=f"video {video_id} in {statuses}")


def wait_task(client: httpx.Client, task_id: str) -> dict:
    def poll() -> dict[str, Any] | None:
        body = client.get(f"/v1/3d/tasks/{task_id}").json()
        return body if body.get("status") in ("succeeded", "failed", "cancelled") else None

    return wait_for(poll, timeout=60, what=f"3D task {task_id}")


def npu_util(client: httpx.Client) -> float:
    return client.get("/api/v1/sys/status").json()["npus"][0]["utilization_percent"]
