"""Tiiny Pocket runners: video and 3D poll; images, speech and music block (reference: tiiny-device-api.md)."""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.utils import timezone

from devices import errors
from devices.services import device_note_loaded, device_note_unloaded
from jobs.models import Artifact
from jobs.runners.base import (
    PollResult,
    ProgressFn,
    Runner,
    Stopped,
    data_uri,
    input_bytes,
    result_path,
    save_artifact,
)

logger = logging.getLogger("jobs.runners.tiiny")
T = TypeVar("T")
FIRST_USE_ATTEMPTS = 4
#: A render we created is recognised in the device's list if it appeared within this slack of our submit.
FIND_SLACK = dt.timedelta(seconds=5)


class TiinyRunner(Runner):
    def prepare(self, *, polite: bool) -> list[str]:
        """Load the model under the lease. ``polite``: refuse (PoliteRefusal) to evict a model the hub did not
        load. Loads that vanish, the fake-fit case and 409 cleanup_failed are handled by ``ensure_loaded``."""
        model = self.job.model_id
        result = self.client.ensure_loaded(
            model, polite=polite, hub_models=self.device.hub_loaded_models or []
        )
        if not result.already_loaded:
            device_note_loaded(device_id=self.device.pk, model_id=model)
        if result.evicted:
            device_note_unloaded(device_id=self.device.pk, model_ids=result.evicted)
        return result.evicted

    def first_use(self, fn: Callable[[], T]) -> T:
        """The first request after a load may answer ``xh2a backend fail`` (500) or 502: bounded retry.

        Only errors that carry an HTTP answer are retried, so a request that might have reached the device
        (a broken connection) is never sent twice.
        """
        for attempt in range(1, FIRST_USE_ATTEMPTS + 1):
            try:
                return fn()
            except (errors.Transient, errors.DeviceBusy) as exc:
                if (
                    attempt == FIRST_USE_ATTEMPTS
                    or exc.status is None
                    or isinstance(exc, errors.CleanupFailed)
                ):
                    raise
                logger.info("job %s: retrying after %s (attempt %d)", self.job.pk, exc.code, attempt)
                self.client.sleep(self.client.load_grace_s)
        raise AssertionError("unreachable")


# ======================================================================================================
# Video (poll)
# ======================================================================================================


class TiinyVideoRunner(TiinyRunner):
    style = "poll"

    def submit(self) -> tuple[str, dict[str, Any]]:
        p = self.job.params
        out = self.first_use(
            lambda: self.client.video_create(
                model=self.job.model_id,
                prompt=p["prompt"],
                size=p["size"],
                seconds=p["seconds"],
                steps=p.get("steps"),
                seed=p.get("seed"),
                image=data_uri(self.job, "start_image"),
            )
        )
        return str(out["id"]), {}

    def find_lost(self) -> str | None:
        """Our render, if the device has one for this prompt created after we started submitting."""
        rows = self.client.video_list()
        since = (self.job.submit_started_at - FIND_SLACK).timestamp() if self.job.submit_started_at else 0
        for row in rows:
            if (
                row.get("prompt") == self.job.params.get("prompt")
                and float(row.get("created_at") or 0) >= since
                and row.get("model") in (None, self.job.model_id)
            ):
                return str(row["id"])
        return None

    def poll(self) -> PollResult:
        v = self.client.video_get(self.job.remote_id)
        status = v.get("status")
        progress = float(v.get("progress") or 0)
        if status == "completed":
            return PollResult("done", 100.0, "Rendered")
        if status == "failed":
            return PollResult("failed", progress, "Failed", error=self.client.video_failure(v))
        return PollResult(
            "running",
            progress,
            "Rendering" if status == "in_progress" else "Waiting on the device",
            started=status == "in_progress",
        )

    def collect(self) -> None:
        dest = result_path(self.job, "video.mp4.download")
        self.client.video_download(self.job.remote_id, dest)
        save_artifact(self.job, kind=Artifact.Kind.VIDEO, name="video.mp4", path=dest, mime="video/mp4")

    def cancel(self) -> None:
        """DELETE doesn't stop the render on the device (reference quirk): stop the video model too (slow)."""
        if self.job.remote_id:
            try:
                self.client.video_delete(self.job.remote_id)
            except errors.NotFound:
                pass
        self.client.stop(self.job.model_id)
        device_note_unloaded(device_id=self.device.pk, model_ids=[self.job.model_id])

    def recover_after_timeout(self) -> list[str]:
        """GENERATION_TIMEOUT: the render goes on in the background. Stop the model (slow, unloads everything),
        then launch it again, retrying the 409 cleanup_failed the device answers once, so the next job finds a
        usable device. Returns what happened, for the job's story."""
        story = []
        self.client.stop(self.job.model_id, timeout=240)
        device_note_unloaded(device_id=self.device.pk, model_ids=list(self.device.hub_loaded_models or []))
        story.append("Stopped the video model (the device keeps rendering otherwise).")
        result = self.client.ensure_loaded(self.job.model_id, polite=False, settle=False, launch_attempts=4)
        device_note_loaded(device_id=self.device.pk, model_id=self.job.model_id)
        story.append(
            f"Relaunched it ({result.launch_attempts} launch attempts; a 409 cleanup_failed is retried)."
        )
        return story


# ======================================================================================================
# 3D (poll, one device task per stage)
# ======================================================================================================

STAGE_FILES = {"shape": ("image",), "simplify": ("mesh",), "texture": ("mesh", "image"), "export": ("mesh",)}


class TiinyMeshRunner(TiinyRunner):
    style = "poll"

    def _stages(self) -> list[str]:
        return [s for s in self.job.params.get("stages") or ["shape", "export"] if s != "background"]

    def _index(self) -> int:
        return int(self.job.remote_data.get("stage_index", 0))

    def _stage_params(self, stage: str) -> dict[str, Any]:
        p = self.job.params
        if stage == "shape":
            out = {"steps": p.get("steps", 30)}
            if p.get("seed") is not None:
                out["seed"] = p["seed"]
            return out
        if stage == "simplify":
            return {"target_faces": p.get("target_faces", 40000)}
        if stage == "texture":
            return {"seed": p["seed"]} if p.get("seed") is not None else {}
        return {"format": p.get("format", "glb")}

    def _files(self, stage: str) -> dict[str, tuple[str, bytes, str]]:
        files: dict[str, tuple[str, bytes, str]] = {}
        for name in STAGE_FILES[stage]:
            if name == "image":
                got = input_bytes(self.job, "image")
                if got is None:
                    raise errors.BadRequest("The picture for this 3D job is missing.")
                data, fname, mime = got
                files["image"] = (fname, data, mime)
            else:
                mesh = self.job.remote_data.get("mesh")
                if not mesh:
                    raise errors.BadRequest("The previous stage left no mesh.")
                files["mesh"] = ("mesh.glb", result_path(self.job, mesh).read_bytes(), "model/gltf-binary")
        return files

    def _submit_stage(self, index: int) -> tuple[str, dict[str, Any]]:
        stage = self._stages()[index]
        out = self.first_use(
            lambda: self.client.task3d_create(
                stage=stage, params=self._stage_params(stage), files=self._files(stage)
            )
        )
        return str(out.get("task_id") or out.get("id")), {"stage_index": index, "stage": stage}

    def submit(self) -> tuple[str, dict[str, Any]]:
        return self._submit_stage(self._index())

    def find_lost(self) -> str | None:
        rows = self.client.task3d_list()
        stage = self._stages()[self._index()]
        since = (self.job.submit_started_at - FIND_SLACK).timestamp() if self.job.submit_started_at else 0
        known = set((self.job.remote_data.get("tasks") or {}).values())
        for row in rows:
            tid = str(row.get("task_id") or row.get("id"))
            if row.get("stage") == stage and float(row.get("created_at") or 0) >= since and tid not in known:
                return tid
        return None

    def poll(self) -> PollResult:
        t = self.client.task3d_get(self.job.remote_id)
        stages = self._stages()
        i = self._index()
        status = t.get("status")
        stage_pct = 100.0 if status == "succeeded" else float(t.get("progress") or 0)
        progress = (i + stage_pct / 100.0) / len(stages) * 100.0
        phase = f"Stage {i + 1} of {len(stages)}: {stages[i]}"
        if status == "succeeded":
            return PollResult("done", progress, phase)
        if status in ("failed", "cancelled"):
            err = t.get("error") or {}
            msg = err.get("message") if isinstance(err, dict) else str(err or "")
            return PollResult(
                "failed",
                progress,
                phase,
                error=errors.BadRequest(f"The device's 3D {stages[i]} stage failed.", detail=msg or status),
            )
        return PollResult("running", progress, phase, started=status == "running")

    def _stage_artifact_url(self) -> str:
        t = self.client.task3d_get(self.job.remote_id)
        arts = t.get("artifacts") or []
        if not arts:
            raise errors.Transient("The device listed no file for the finished stage.")
        return str(arts[0].get("url") or arts[0].get("name"))

    def advance(self) -> tuple[str, dict[str, Any]] | None:
        """Keep this stage's mesh, then submit the next stage (None after the last)."""
        i = self._index()
        stage = self._stages()[i]
        name = f"stage-{i + 1}-{stage}.glb"
        self.client.task3d_download(self._stage_artifact_url(), result_path(self.job, name))
        tasks = {**(self.job.remote_data.get("tasks") or {}), stage: self.job.remote_id}
        if i + 1 >= len(self._stages()):
            return None
        self.job.remote_data = {**self.job.remote_data, "mesh": name, "tasks": tasks}
        remote_id, data = self._submit_stage(i + 1)
        return remote_id, {"mesh": name, "tasks": tasks, **data}

    def collect(self) -> None:
        i = self._index()
        stage = self._stages()[i]
        staged = result_path(self.job, f"stage-{i + 1}-{stage}.glb")
        fmt = self.job.params.get("format", "glb")
        save_artifact(
            self.job,
            kind=Artifact.Kind.MESH,
            name=f"model.{fmt}",
            path=staged,
            mime="model/gltf-binary" if fmt == "glb" else "text/plain",
        )

    def cancel(self) -> None:
        if self.job.remote_id:
            try:
                self.client.task3d_cancel(self.job.remote_id)
            except (errors.NotFound, errors.DeviceBusy, errors.BadRequest):
                pass  # already finished or gone


# ======================================================================================================
# Blocking: image, speech, music
# ======================================================================================================


class TiinyImageRunner(TiinyRunner):
    """n images → n device calls (the device makes one image per request). Each image is saved as it comes,
    and ``remote_data["done"]`` counts them, so a re-queued job only makes the missing ones."""

    def execute(self, progress: ProgressFn) -> None:
        from jobs.transitions import job_set

        p = self.job.params
        n = int(p.get("n", 1) or 1)
        done = int(self.job.remote_data.get("done", 0))
        seed = p.get("seed")
        for i in range(done, n):
            if progress(100.0 * i / n, f"Image {i + 1} of {n}"):
                raise Stopped
            png = self.first_use(
                lambda i=i: self.client.image_generate(
                    model=self.job.model_id,
                    prompt=p["prompt"],
                    size=p["size"],
                    steps=p.get("steps"),
                    seed=None if seed is None else seed + i,
                    negative_prompt=p.get("negative_prompt"),
                    timeout=self.timeout_s(),
                )
            )
            if progress(100.0 * (i + 0.9) / n, f"Image {i + 1} of {n}"):
                raise Stopped
            save_artifact(
                self.job, kind=Artifact.Kind.IMAGE, name=f"image-{i + 1}.png", data=png, mime="image/png"
            )
            self.job.remote_data = {**self.job.remote_data, "done": i + 1}
            job_set(self.job.pk, remote_data=self.job.remote_data)
        progress(100.0, "Saved")


class TiinySpeechRunner(TiinyRunner):
    def execute(self, progress: ProgressFn) -> None:
        p = self.job.params
        progress(5.0, "Speaking")
        ref = input_bytes(self.job, "ref_audio")
        audio = self.first_use(
            lambda: self.client.speech(
                model=self.job.model_id,
                input=p["input"],
                voice=p.get("voice"),
                instruct=p.get("instruct"),
                ref_audio=base64.b64encode(ref[0]).decode() if ref else None,
                ref_text=p.get("ref_text"),
                language=p.get("language"),
                response_format=p.get("response_format", "wav"),
                timeout=self.timeout_s(),
            )
        )
        if progress(95.0, "Saving"):
            raise Stopped
        fmt = p.get("response_format", "wav")
        save_artifact(
            self.job,
            kind=Artifact.Kind.AUDIO,
            name=f"speech.{fmt}",
            data=audio,
            mime="audio/mpeg" if fmt == "mp3" else "audio/wav",
        )


class TiinyMusicRunner(TiinyRunner):
    """Foundation-1: one ``generate/wav`` call. SongGeneration: preview, then resume the session (the plain
    generate route answers "Session not found"; resume ignores seconds_total, so the preview asks for it)."""

    def is_song(self) -> bool:
        return "songgeneration" in self.job.model_id.lower()

    def execute(self, progress: ProgressFn) -> None:
        p = self.job.params
        if not self.is_song():
            progress(5.0, "Generating the loop")
            wav = self.first_use(
                lambda: self.client.music_wav(
                    model=self.job.model_id,
                    prompt=p["prompt"],
                    seconds=p["seconds"],
                    steps=p.get("steps", 75),
                    cfg_scale=p.get("cfg_scale", 7.0),
                    seed=p.get("seed"),
                    timeout=self.timeout_s(),
                )
            )
            if progress(95.0, "Saving"):
                raise Stopped
            save_artifact(self.job, kind=Artifact.Kind.AUDIO, name="loop.wav", data=wav, mime="audio/wav")
            return
        from jobs.transitions import job_set

        progress(5.0, "Preview")
        preview = self.first_use(
            lambda: self.client.song_preview(
                model=self.job.model_id,
                caption=p.get("caption", ""),
                lyrics=p.get("lyrics", ""),
                generation_type=p.get("generation_type", "mixed"),
                seconds_total=p["seconds"],
                preview_seconds=p.get("preview_seconds", 10),
                timeout=self.timeout_s(),
            )
        )
        session = str(preview["session_id"])
        job_set(self.job.pk, remote_id=session)
        if progress(30.0, "Full length"):
            raise Stopped
        config: dict[str, Any] = {
            "caption": p.get("caption", ""),
            "generation_type": p.get("generation_type", "mixed"),
            "seconds_total": p["seconds"],
        }
        if p.get("lyrics"):
            config["lyrics"] = p["lyrics"]
        full = self.client.song_resume(
            model=self.job.model_id, session_id=session, config=config, timeout=self.timeout_s()
        )
        audio = full.get("audio_data")
        data = base64.b64decode(audio) if audio else self.client.song_download(session, "wav")
        if progress(95.0, "Saving"):
            raise Stopped
        save_artifact(self.job, kind=Artifact.Kind.AUDIO, name="song.wav", data=data, mime="audio/wav")


def now() -> dt.datetime:
    return timezone.now()
