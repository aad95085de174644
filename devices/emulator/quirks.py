"""The Tiiny Pocket's known quirks (tiiny-device-api.md "Known quirks"), each switchable by name.

All are on by default so the emulator behaves like the real device. Switching one off makes the device
"ideal" for that one point (e.g. no 502 right after a load, a fast video-model stop).
"""

from __future__ import annotations

from collections.abc import Iterable

QUIRKS: dict[str, str] = {
    "locked_after_power_cycle": "after a power cycle every call answers 502 until the device is unlocked",
    "xh2a_after_load": "the first inference after a model load fails with 500 'xh2a backend fail'",
    "bad_gateway_after_load": "calls to a model within a short grace after its load answer 502 upstream_error",
    "fake_fit": "unload_candidate says a model fits when the NPU is nearly full; that launch silently vanishes",
    "generation_timeout": "after 60 device-minutes a video job reports GENERATION_TIMEOUT but keeps rendering",
    "delete_does_not_stop": "DELETE /v1/videos/{id} answers deleted but the render keeps the NPU busy",
    "slow_stop_cleanup_failed": "stopping the video model takes 90 s, unloads everything, next launch 409s once",
    "video_seconds_cap": "videos over 7 s are accepted, then fail at once with 'no exported bucket fits'",
    "canvas_check": "a video size outside the canvases is accepted, then fails a few seconds in",
    "single_image": "image generation with n > 1 fails",
    "tts_voice_check": "a voice that is not one of the TTS model's speakers gives 500 upstream TTS failure",
    "supertonic_broken": "Supertonic-3 always fails through the API",
    "songgen_session": "plain /v1/music/generate for SongGeneration 404s SESSION_NOT_FOUND; top-level prompt 400s",
    "hunyuan_background": "the Hunyuan3D background stage fails (BriefNet missing)",
    "one_at_a_time": "the device runs one inference at a time; others wait in line",
    "models_redirect": "GET /api/v1/models (no slash) redirects to http://p8800.api.tiiny/api/v1/models/",
    "slash_ids": "model ids contain '/', accepted raw or %2F-encoded (a catalogue fact, always accepted)",
    "chat_usage_chunk": "streaming chat ends with a usage chunk whose choices list is empty",
}

ALL_QUIRKS: tuple[str, ...] = tuple(QUIRKS)


class UnknownQuirk(ValueError):
    pass


def check_names(names: Iterable[str]) -> list[str]:
    names = list(names)
    unknown = [n for n in names if n not in QUIRKS]
    if unknown:
        raise UnknownQuirk(f"unknown quirk(s): {', '.join(unknown)}; known: {', '.join(ALL_QUIRKS)}")
    return names


def parse_quirks(spec: str | Iterable[str] | None) -> set[str]:
    """'all' | 'none' | 'a,b,c' | 'all,-a' (everything but a) | a list of names → the enabled set."""
    if spec is None:
        return set(ALL_QUIRKS)
    tokens = [t.strip() for t in spec.split(",")] if isinstance(spec, str) else [str(t) for t in spec]
    enabled: set[str] = set()
    for item in filter(None, tokens):
        if item == "all":
            enabled |= set(ALL_QUIRKS)
        elif item == "none":
            enabled.clear()
        elif item.startswith("-"):
            enabled.discard(check_names([item[1:]])[0])
        else:
            enabled.add(check_names([item])[0])
    return enabled
