"""TensorSharp.Server.Host runners: video and image edit over SSE (field notes §11).

The render lives as long as the HTTP stream: the worker holds it, forwards progress as frames arrive, and closes
it to cancel. Results are relative ``/uploads/...`` URLs resolved against the device (never another host).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from devices import errors
from jobs.files.previews import clear_preview, keep_preview, preview_from_frame
from jobs.files.store import input_bytes, save_artifact, work_path
from jobs.kinds.runners.base import ProgressFn, Runner, Stopped
from jobs.models import Artifact

logger = logging.getLogger("jobs.kinds.runners.tensorsharp")
PHASES = {
    "text-encode": (0, 5),
    "image-encode": (5, 8),
    "denoise": (8, 90),
    "vae-decode": (90, 97),
    "audio-decode": (97, 99),
    "done": (99, 100),
}


#: A finished render's result stays on the host as a file: when its download keeps breaking (a Wi-Fi link gone
#: silent), it is asked for again for this long, waiting these seconds between two tries, before the job is given
#: back to the queue (which renders it again). The worker holds the job meanwhile, as it did during the stream.
FETCH_PATIENCE_S = 300.0
FETCH_WAITS_S = (5.0, 10.0, 20.0, 30.0)


class TensorSharpRunner(Runner):
    style = "stream"
    needs = "video"
    sleep = staticmethod(time.sleep)

    def _fetch(self, url: str, dest: Path, progress: ProgressFn) -> None:
        """Download a finished render's result (``client.download``: resumed or begun again, checked whole); a
        link that broke or went silent is asked again for up to ``FETCH_PATIENCE_S``, never the render."""
        started, tries = time.monotonic(), 0
        while True:
            try:
                self.client.download(url, dest)
                return
            except (errors.DeviceUnreachable, errors.Transient) as exc:
                if exc.status is not None or time.monotonic() - started >= FETCH_PATIENCE_S:
                    raise
                logger.info("job %s: result download broke (%s); asking again", self.job.pk, exc.code)
            if progress(99.0, "Downloading the result again"):
                raise Stopped
            self.sleep(FETCH_WAITS_S[min(tries, len(FETCH_WAITS_S) - 1)])
            tries += 1

    def prepare(self, *, polite: bool) -> list[str]:
        """The server hosts one model and can only reload that same one: check it is the job's model."""
        info = self.client.models()
        loaded = str(info.get("loaded") or "")
        if self.needs == "video" and info.get("video") is None:
            raise errors.ModelNotLoaded("The server's model is not a video model now.", detail=loaded)
        if loaded and loaded != self.job.model_id:
            raise errors.BadRequest(f"The server now hosts {loaded}, not {self.job.model_id}.", detail=loaded)
        return []

    def _upload(self, name: str) -> str | None:
        got = input_bytes(self.job, name)
        if got is None:
            return None
        data, fname, mime = got
        return str(self.client.upload(fname, data, mime)["file"])

    def _run_stream(self, frames, progress: ProgressFn) -> dict[str, Any]:
        final: dict[str, Any] = {}
        clear_preview(self.job)  # a retry must not show the last attempt's picture
        try:
            for frame in frames:
                if frame.get("done"):
                    final = frame
                    break
                self._keep_preview(frame)
                pct, phase = _progress_of(frame)
                if progress(pct, phase):
                    raise Stopped  # leaving the loop closes the stream: the server cancels the render
        finally:
            close = getattr(frames, "close", None)
            if close:
                close()
        if not final:
            raise errors.Transient("The server closed the stream before the render finished.")
        return final

    def _keep_preview(self, frame: dict[str, Any]) -> None:
        """The job page shows the latest preview while it renders: one file on the hub's disk, replaced."""
        data = preview_from_frame(frame)
        if data is None:
            return
        try:
            keep_preview(self.job, data)
        except OSError as exc:  # a full disk costs the preview, never the render
            logger.warning("job %s: could not keep the preview: %s", self.job.pk, exc)


def _progress_of(frame: dict[str, Any]) -> tuple[float, str]:
    step, total = frame.get("step"), frame.get("total")
    phase = frame.get("phase") or "denoise"
    lo, hi = PHASES.get(phase, (8, 90))
    if phase == "denoise" and step is not None and total:
        return lo + (hi - lo) * float(step) / float(total), f"Step {step} of {total}"
    if frame.get("imageEdit") and step is not None and total:
        return 5 + 90 * float(step) / float(total), f"Step {step} of {total}"
    return float(lo), phase.replace("-", " ").capitalize()


class TensorSharpVideoRunner(TensorSharpRunner):
    def body(self) -> dict[str, Any]:
        p = self.job.params
        body: dict[str, Any] = {
            "prompt": p["prompt"],
            "width": p["width"],
            "height": p["height"],
            "frames": p["frames"],
            "steps": p["steps"],
            "videoMode": p.get("video_mode", "t2v"),
        }
        for src, dst in (("cfg", "cfg"), ("seed", "seed"), ("generate_audio", "generateAudio")):
            if p.get(src) is not None:
                body[dst] = p[src]
        if first := self._upload("start_image"):
            body["imagePath"] = first
        if end := self._upload("end_image"):
            body["endImage"] = end
        return body

    def execute(self, progress: ProgressFn) -> None:
        progress(1.0, "Uploading")
        frames = self.client.video_stream(self.body(), read_timeout=self.timeout_s())
        final = self._run_stream(frames, progress)
        progress(99.0, "Downloading")
        dest = work_path(self.job, "video.mp4.download")
        self._fetch(final["url"], dest, progress)
        save_artifact(self.job, kind=Artifact.Kind.VIDEO, name="video.mp4", path=dest, mime="video/mp4")
        if final.get("audioUrl"):  # MiniMax-H3's audio is a separate WAV, never muxed: keep it beside the MP4
            wav = work_path(self.job, "audio.wav.download")
            self._fetch(final["audioUrl"], wav, progress)
            save_artifact(self.job, kind=Artifact.Kind.SIDECAR, name="audio.wav", path=wav, mime="audio/wav")
        clear_preview(self.job)  # the result replaces it

    def timeout_s(self) -> float:
        # Between two SSE frames, not for the whole render: a heartbeat or step arrives well within this.
        return max(600.0, (self.job.estimate_s or 60) + 300)


class TensorSharpEditRunner(TensorSharpRunner):
    needs = "image_edit"

    def prepare(self, *, polite: bool) -> list[str]:
        info = self.client.models()
        loaded = str(info.get("loaded") or "")
        if loaded and loaded != self.job.model_id:
            raise errors.BadRequest(f"The server now hosts {loaded}, not {self.job.model_id}.", detail=loaded)
        return []

    def execute(self, progress: ProgressFn) -> None:
        p = self.job.params
        progress(1.0, "Uploading")
        name = self._upload("image")
        if not name:
            raise errors.BadRequest("The picture for this edit is missing.")
        body: dict[str, Any] = {"imagePath": name, "prompt": p["prompt"], "steps": p.get("steps", 30)}
        for k in ("cfg", "seed"):
            if p.get(k) is not None:
                body[k] = p[k]
        final = self._run_stream(self.client.image_edit_stream(body, read_timeout=self.timeout_s()), progress)
        dest = work_path(self.job, "image.png.download")
        self._fetch(final["url"], dest, progress)
        save_artifact(self.job, kind=Artifact.Kind.IMAGE, name="image.png", path=dest, mime="image/png")
        clear_preview(self.job)  # the result replaces it
