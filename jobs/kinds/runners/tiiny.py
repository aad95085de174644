"""Tiiny Pocket runners: video and 3D poll; images, speech and music block (reference: tiiny-device-api.md)."""

from __future__ import annotations

import base64
import datetime as dt
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.utils import timezone

from devices import errors
from devices.services import device_note_loaded, device_note_running, device_note_unloaded
from jobs.core.transitions import job_set
from jobs.files.store import data_uri, fetch_work, input_bytes, keep_work, save_artifact, work_path
from jobs.kinds.estimates import stage_3d_seconds
from jobs.kinds.runners.base import PollResult, ProgressFn, Runner, Stopped
from jobs.models import Artifact, Job

logger = logging.getLogger("jobs.kinds.runners.tiiny")
T = TypeVar("T")
#: Attempts of the first request once the readiness window has passed (``xh2a`` can still come once), at least;
#: retries go on for up to this many more windows while the device still answers xh2a / 502.
AFTER_WINDOW_ATTEMPTS = 2
LATE_WINDOWS = 3
#: The first retry inside the window waits this share of it, then twice as long each time.
FIRST_RETRY_SHARE = 1 / 40
#: Send the first request after a load at once and retry inside the readiness window (True), or sit out the
#: window first (False). bench/bench_night.py measures both with the emulator's quirks on and off; sending at
#: once was faster in both (bench/RESULTS.md, "first request after a load").
OPTIMISTIC_FIRST_USE = True
#: A render we created is recognised in the device's list if it appeared within this slack of our submit.
FIND_SLACK = dt.timedelta(seconds=5)
TAG_MAX = 2**31 - 1


class TiinyRunner(Runner):
    #: ``clock.monotonic()`` when the model this job uses became ready (None: it was already loaded)
    ready_at: float | None = None
    #: seconds the job's first request waited for the model to take requests (its retries in the readiness
    #: window); None until the first request went through
    ready_wait_s: float | None = None

    def prepare(self, *, polite: bool) -> list[str]:
        """Load the model under the lease. ``polite``: refuse (PoliteRefusal) to evict a model the hub did not
        load. Loads that vanish, the fake-fit case and 409 cleanup_failed are handled by ``ensure_loaded``."""
        model = self.job.model_id
        result = self.client.ensure_loaded(
            model,
            polite=polite,
            hub_models=self.device.hub_loaded_models or [],
            hub_instances=self.device.hub_loaded_instances or {},
            settle=not OPTIMISTIC_FIRST_USE,
        )
        self.ready_at = result.ready_at
        self.loaded = not result.already_loaded
        if result.state is not None:
            # The device's running list was just read: the hub's own list is reconciled with it.
            device_note_running(
                device_id=self.device.pk,
                state=result.state,
                loaded=None if result.already_loaded else model,
                unloaded=result.evicted,
            )
        else:  # pragma: no cover - ensure_loaded always returns the state it read
            if not result.already_loaded:
                device_note_loaded(device_id=self.device.pk, model_id=model)
            if result.evicted:
                device_note_unloaded(device_id=self.device.pk, model_ids=result.evicted)
        return result.evicted

    def first_use(self, fn: Callable[[], T]) -> T:
        """The first request after a load may answer ``xh2a backend fail`` (500) or 502 for a while (the
        reference: "wait ~10 s and retry"). It is sent at once and retried with a growing pause until the
        readiness window, counted from the moment the model became ready, has passed; after it, quickly once (an
        ``xh2a`` comes on the first request that reaches the model), then with growing pauses for up to
        ``LATE_WINDOWS`` more windows (a device slower than documented) before the error counts.

        Only errors that carry an HTTP answer are retried, so a request that might have reached the device
        (a broken connection) is never sent twice.
        """
        clock, grace = self.client.clock, float(self.client.load_grace_s or 0.0)
        start = clock.monotonic()
        until = (self.ready_at if self.ready_at is not None else start) + grace
        give_up = until + LATE_WINDOWS * grace
        pause = max(grace * FIRST_RETRY_SHARE, 0.001)
        attempt = late = 0
        while True:
            attempt += 1
            sent = clock.monotonic()
            try:
                out = fn()
            except (errors.Transient, errors.DeviceBusy) as exc:
                if exc.status is None or isinstance(exc, errors.CleanupFailed):
                    raise
                now = clock.monotonic()
                if now < until:
                    wait = min(pause * 2 ** (attempt - 1), max(until - now, pause))
                else:
                    late += 1
                    if late > AFTER_WINDOW_ATTEMPTS and now >= give_up:
                        raise
                    wait = min(pause * 2 ** (late - 1), max(give_up - now, pause))
                logger.info("job %s: retrying after %s (attempt %d)", self.job.pk, exc.code, attempt)
                self.client.sleep(wait)
                continue
            if self.ready_wait_s is None:
                self.ready_wait_s = round(sent - start, 3)
            if self.style != "poll":  # a blocking call's end: the device's work is over (engine step timings)
                logger.debug("trace job=%s step=answer t=%.4f", self.job.pk, time.time())
            return out

    # -- crash recovery: which render in the device's list is ours ------------------------------------------
    def submit_marks(self) -> dict[str, Any]:
        """Stored with the job before the create call (the crash window): a tag the device echoes back."""
        return {}

    def _others_own(self, ids: list[str]) -> set[str]:
        """Of ``ids``, the renders other jobs already hold (so an identical job never adopts them)."""
        if not ids:
            return set()
        return set(
            Job.objects.filter(device_id=self.device.pk, remote_id__in=ids)
            .exclude(pk=self.job.pk)
            .values_list("remote_id", flat=True)
        )

    def _since(self) -> float:
        return (self.job.submit_started_at - FIND_SLACK).timestamp() if self.job.submit_started_at else 0

    def _pick(self, rows: list[dict[str, Any]], id_key: str) -> str | None:
        """The first render created after we began submitting that no other job holds: one job at a time runs
        on the device, so in the order of submission the earliest free one is ours."""
        ids = [str(r.get(id_key) or r.get("id")) for r in rows]
        taken = self._others_own(ids)
        free = [
            (float(r.get("created_at") or 0), i) for r, i in zip(rows, ids, strict=True) if i not in taken
        ]
        return min(free)[1] if free else None


def _tag() -> int:
    return secrets.randbelow(TAG_MAX) + 1


# ======================================================================================================
# Video (poll)
# ======================================================================================================


class TiinyVideoRunner(TiinyRunner):
    style = "poll"

    def _seed(self) -> int | None:
        p = self.job.params
        return p["seed"] if p.get("seed") is not None else self.job.remote_data.get("seed")

    def submit_marks(self) -> dict[str, Any]:
        """No seed asked for: the hub picks one (the device would pick one at random anyway) and stores it before
        the create call. The device echoes the seed in its list, so after a crash two identical prompts sent
        seconds apart are told apart by it."""
        if self.job.params.get("seed") is not None or self.job.remote_data.get("seed") is not None:
            return {}
        return {"seed": _tag()}

    def submit(self) -> tuple[str, dict[str, Any]]:
        p = self.job.params
        out = self.first_use(
            lambda: self.client.video_create(
                model=self.job.model_id,
                prompt=p["prompt"],
                size=p["size"],
                seconds=p["seconds"],
                steps=p.get("steps"),
                seed=self._seed(),
                image=data_uri(self.job, "start_image"),
            )
        )
        return str(out["id"]), {}

    def find_lost(self) -> str | None:
        """Our render, if the device lists one with our prompt and seed, created after we started submitting
        and held by no other job (a device that does not echo seeds is matched on the rest)."""
        since, seed = self._since(), self._seed()
        rows = [
            row
            for row in self.client.video_list()
            if row.get("prompt") == self.job.params.get("prompt")
            and float(row.get("created_at") or 0) >= since
            and row.get("model") in (None, self.job.model_id)
            and (seed is None or row.get("seed") is None or int(row["seed"]) == int(seed))
        ]
        return self._pick(rows, "id")

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
        dest = work_path(self.job, "video.mp4.download")
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
        self._after_stop([self.job.model_id])

    def _after_stop(self, stopped: list[str]) -> None:
        """A video-model stop may unload every model (slow stop): read what is left and reconcile the hub's list
        with it, so models someone else loads afterwards are never taken for the hub's own."""
        try:
            state = self.client.running()
        except errors.DeviceError:
            device_note_unloaded(device_id=self.device.pk, model_ids=stopped)
            return
        device_note_running(device_id=self.device.pk, state=state, unloaded=stopped)

    def recover_after_timeout(self) -> list[str]:
        """GENERATION_TIMEOUT: the render goes on in the background. Stop the model (slow, unloads everything),
        then launch it again, retrying the 409 cleanup_failed the device answers once, so the next job finds a
        usable device. Returns what happened, for the job's story."""
        story = []
        self.client.stop(self.job.model_id, timeout=240)
        self._after_stop([self.job.model_id])
        story.append("Stopped the video model (the device keeps rendering otherwise).")
        result = self.client.ensure_loaded(self.job.model_id, polite=False, settle=False, launch_attempts=4)
        if result.state is not None:
            device_note_running(device_id=self.device.pk, state=result.state, loaded=self.job.model_id)
        else:  # pragma: no cover
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

    def _weights(self) -> tuple[list[float], int]:
        """Each stage's share of the job's time (the reference's stage times), and the current stage's index."""
        weights = [stage_3d_seconds(s) for s in self._stages()]
        total = sum(weights)
        return [w / total for w in weights], min(self._index(), len(weights) - 1)

    def _progress(self, stage_pct: float) -> float:
        """The whole job's progress: the stages before this one and this one's part, each by its share of the
        time, so progress moves with time and the plans' "what is left" (``jobs.queue.eta.remaining_seconds``)
        holds: by stage count, a 3D job was half done when its 7-minute shape ended with 15 s of export left."""
        weights, i = self._weights()
        return (sum(weights[:i]) + weights[i] * stage_pct / 100.0) * 100.0

    def stage_progress(self, progress: float) -> tuple[float, float]:
        """(share of the current stage done, the stage's share of the whole job's time), for the poll rhythm."""
        weights, i = self._weights()
        return (float(progress or 0.0) / 100.0 - sum(weights[:i])) / weights[i], weights[i]

    def _seed(self) -> int | None:
        p = self.job.params
        return p["seed"] if p.get("seed") is not None else self.job.remote_data.get("seed")

    def submit_marks(self) -> dict[str, Any]:
        """As for video: a seed the shape and texture stages take (and the device echoes in ``params``)."""
        if self._seed() is not None:
            return {}
        return {"seed": _tag()}

    def _stage_params(self, stage: str) -> dict[str, Any]:
        p = self.job.params
        seed = self._seed()
        if stage == "shape":
            out = {"steps": p.get("steps", 30)}
            if seed is not None:
                out["seed"] = seed
            return out
        if stage == "simplify":
            return {"target_faces": p.get("target_faces", 40000)}
        if stage == "texture":
            return {"seed": seed} if seed is not None else {}
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
                files["mesh"] = ("mesh.glb", fetch_work(self.job, mesh).read_bytes(), "model/gltf-binary")
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
        stage = self._stages()[self._index()]
        since, seed = self._since(), self._seed()
        known = set((self.job.remote_data.get("tasks") or {}).values())
        rows = []
        for row in self.client.task3d_list():
            tid = str(row.get("task_id") or row.get("id"))
            echoed = (row.get("params") or {}).get("seed") if isinstance(row.get("params"), dict) else None
            if (
                row.get("stage") == stage
                and float(row.get("created_at") or 0) >= since
                and tid not in known
                and (seed is None or echoed is None or int(echoed) == int(seed))
            ):
                rows.append(row)
        return self._pick(rows, "task_id")

    def poll(self) -> PollResult:
        t = self.client.task3d_get(self.job.remote_id)
        stages = self._stages()
        i = self._index()
        status = t.get("status")
        stage_pct = 100.0 if status == "succeeded" else float(t.get("progress") or 0)
        progress = self._progress(stage_pct)
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
        self.client.task3d_download(self._stage_artifact_url(), work_path(self.job, name))
        keep_work(self.job, name)  # in the store: a worker elsewhere that takes the job over goes on from it
        tasks = {**(self.job.remote_data.get("tasks") or {}), stage: self.job.remote_id}
        if i + 1 >= len(self._stages()):
            return None
        self.job.remote_data = {**self.job.remote_data, "mesh": name, "tasks": tasks}
        remote_id, data = self._submit_stage(i + 1)
        return remote_id, {"mesh": name, "tasks": tasks, **data}

    def collect(self) -> None:
        i = self._index()
        stage = self._stages()[i]
        staged = fetch_work(self.job, f"stage-{i + 1}-{stage}.glb")
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
