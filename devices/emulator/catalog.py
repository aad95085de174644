"""The emulated Tiiny Pocket's installed models and the device-time cost of its work.

Rows and NPU units come from tiiny-field-notes.md §5.2 (live catalogue) and tiiny-device-api.md (TTS
table, video, 3D). Values the references do not give are marked "assumed" and chosen to be plausible.
`load_time` is in device seconds (the emulator divides it by --speed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Capability tag per model type, as measured live (field notes §5.1).
CAPABILITY_BY_TYPE: dict[str, str] = {
    "Text Generation": "main",
    "Image-Text-to-Text": "main",
    "Text-to-Speech": "voice",
    "ASR": "audio",
    "Text Embedding": "embedding",
    "Text Reranking": "rerank",
    "Text-to-Image": "image",
    "Image-to-Text": "ocr",
    "Music Generation": "music",
    "Text-to-Video": "video",  # assumed: no public capture of the video model's row
    "Image-to-3D": "3d",  # assumed
}


@dataclass(frozen=True)
class ModelSpec:
    model_id: str
    type: str
    kind: str  # internal routing class: chat, image, video, tts, music_loop, music_song, 3d, embed, ...
    npu_usage: int
    load_time: float  # device seconds from launch to running
    params: str = ""
    total_size: int = 0
    input: str = "Text"
    output: str = "Text"
    supported: tuple[str, ...] = ()
    desc: str = ""
    speakers: tuple[str, ...] = ()  # TTS: the model's own voices
    tts_mode: str = ""  # TTS: preset | design | clone | broken
    thinking: dict | None = None
    context_window: int = 0

    @property
    def name(self) -> str:
        return self.model_id.rsplit("/", 1)[-1]

    @property
    def capability(self) -> str:
        return CAPABILITY_BY_TYPE.get(self.type, "main")


# The video model. Its id is assumed (MiniMax's Hugging Face org is MiniMaxAI); 45 NPU units is assumed
# (a 1344x768 video DiT plus audio VAE, between Z-Image-Turbo's 32 and a 35B chat model's 55); the 5 s
# load time is the one the API doc measured ("launching again worked (loaded in 5 s)").
VIDEO_MODEL_ID = "MiniMaxAI/MiniMax-H3-Turbo"
HUNYUAN_ID = "tencent/Hunyuan3D-2.1"
FOUNDATION_ID = "RoyalCities/Foundation-1"
SONGGEN_ID = "tencent/SongGeneration-v2-large"
ZIMAGE_ID = "Tongyi-MAI/Z-Image-Turbo"
CHAT_MODEL_ID = "Qwen/Qwen3.6-35B-A3B-turbo"
SUPERTONIC_ID = "Supertone/supertonic-3"

_THINKING = {
    "supported": True,
    "toggleable": True,
    "enabled_by_default": True,
    "levels": [],
    "default_level": None,
}
_GPT_OSS_THINKING = {
    "supported": True,
    "toggleable": False,
    "enabled_by_default": True,
    "levels": ["low", "medium", "high"],
    "default_level": "medium",
}
_NO_THINKING = {
    "supported": False,
    "toggleable": False,
    "enabled_by_default": False,
    "levels": [],
    "default_level": None,
}

QWEN_CUSTOM_VOICES = ("aiden", "dylan", "eric", "ono_anna", "ryan", "serena", "sohee", "uncle_fu", "vivian")
SUPERTONIC_VOICES = ("F1", "F2", "F3", "F4", "F5", "M1", "M2", "M3", "M4", "M5")


def _vibevoice_speakers() -> tuple[str, ...]:
    """61 speakers named <lang>-<Name>_<woman|man> (the doc names en-Emma_woman, en-Carter_man)."""
    by_lang = {
        "en": [
            "Emma_woman",
            "Carter_man",
            "Grace_woman",
            "Davis_man",
            "Frank_man",
            "Mike_man",
            "Alice_woman",
            "Mary_woman",
            "Maya_woman",
            "Samuel_man",
            "Olivia_woman",
            "James_man",
            "Sophia_woman",
            "Henry_man",
            "Chloe_woman",
            "Liam_man",
            "Ava_woman",
            "Noah_man",
            "Isla_woman",
            "Ethan_man",
            "Zoe_woman",
        ],
        "de": ["Anna_woman", "Lukas_man", "Mia_woman", "Jonas_man", "Lena_woman", "Felix_man"],
        "fr": ["Camille_woman", "Louis_man", "Chloe_woman", "Hugo_man", "Manon_woman", "Jules_man"],
        "es": ["Lucia_woman", "Mateo_man", "Sofia_woman", "Diego_man", "Elena_woman"],
        "it": ["Giulia_woman", "Marco_man", "Chiara_woman", "Luca_man"],
        "pt": ["Beatriz_woman", "Joao_man", "Ana_woman", "Pedro_man"],
        "nl": ["Sanne_woman", "Daan_man", "Eva_woman"],
        "pl": ["Zofia_woman", "Jakub_man", "Maja_woman"],
        "jp": ["Yui_woman", "Haruto_man", "Sakura_woman"],
        "kr": ["Jiwoo_woman", "Minjun_man", "Seoyeon_woman"],
        "zh": ["Xiaoyu_woman", "Haoran_man", "Meiling_woman"],
    }
    names = tuple(f"{lang}-{n}" for lang, ns in by_lang.items() for n in ns)
    assert len(names) == 61, len(names)
    return names


VIBEVOICE_RT_SPEAKERS = _vibevoice_speakers()


def _m(model_id: str, type_: str, kind: str, npu: int, load: float, **kw: object) -> ModelSpec:
    return ModelSpec(model_id=model_id, type=type_, kind=kind, npu_usage=npu, load_time=load, **kw)


CATALOG: tuple[ModelSpec, ...] = (
    # Chat (field notes §5.2, live units). Load times assumed from size ("a large model takes tens of s").
    _m(
        CHAT_MODEL_ID,
        "Image-Text-to-Text",
        "chat",
        55,
        40,
        params="35B",
        total_size=17865442756,
        input="Text,Image",
        supported=("Image Understanding", "Tool Use", "Thinking"),
        thinking=_THINKING,
        context_window=131072,
        desc="Qwen3.6 35B-A3B MoE, fast chat with vision",
    ),
    _m(
        "deepreinforce-ai/Ornith-1.0-35B",
        "Image-Text-to-Text",
        "chat",
        50,
        40,
        params="35B",
        total_size=18041197148,
        input="Text,Image",
        supported=("Image Understanding", "Tool Use"),
        thinking=_THINKING,
        context_window=131072,
    ),
    _m(
        "Qwen/Qwen3-Coder-Next",
        "Text Generation",
        "chat",
        94,
        80,
        params="80B",
        total_size=37697536035,
        supported=("Tool Use",),
        thinking=_NO_THINKING,
        context_window=262144,
    ),
    _m(
        "openai/gpt-oss-120b",
        "Text Generation",
        "chat",
        99,
        90,
        params="120B",
        total_size=36813697569,
        supported=("Tool Use", "Thinking"),
        thinking=_GPT_OSS_THINKING,
        context_window=131072,
    ),
    _m(
        "openai/gpt-oss-20b",
        "Text Generation",
        "chat",
        32,
        25,
        params="20B",
        total_size=12109565952,
        supported=("Tool Use", "Thinking"),
        thinking=_GPT_OSS_THINKING,
        context_window=131072,
    ),
    _m(
        "Qwen/Qwen3-30B-A3B-Instruct",
        "Text Generation",
        "chat",
        55,
        40,
        params="30B",
        total_size=17284526080,
        supported=("Tool Use",),
        thinking=_NO_THINKING,
        context_window=131072,
    ),
    _m(
        "Qwen/Qwen3-8B",
        "Text Generation",
        "chat",
        28,
        15,
        params="8B",
        total_size=4300000000,
        supported=("Tool Use", "Thinking"),
        thinking=_THINKING,
        context_window=32768,
    ),
    # Images.
    _m(
        ZIMAGE_ID,
        "Text-to-Image",
        "image",
        32,
        25,
        params="6B",
        total_size=10225914531,
        output="Image",
        desc="Z-Image-Turbo text-to-image, one image per request",
    ),
    _m(
        "black-forest-labs/FLUX.2-klein-4B",
        "Text-to-Image",
        "image",
        50,
        20,
        params="4B",
        total_size=7800000000,
        input="Text,Image",
        output="Image",
        supported=("Image Editing",),
    ),
    _m("baidu/ERNIE-Image-Turbo", "Text-to-Image", "image", 42, 25, total_size=11400000000, output="Image"),
    # Music.
    _m(
        SONGGEN_ID,
        "Music Generation",
        "music_song",
        28,
        30,
        params="4B",
        total_size=6863542044,
        output="Audio",
        desc="Songs with lyrics; preview then resume",
    ),
    _m(
        FOUNDATION_ID,
        "Music Generation",
        "music_loop",
        5,
        8,
        params="2B",
        total_size=1392801988,
        output="Audio",
        desc="Instrument loops and samples",
    ),
    # Speech (API doc TTS table; units from field notes where known, else assumed).
    _m(
        "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
        "Text-to-Speech",
        "tts",
        7,
        8,
        params="1.7B",
        total_size=2443149780,
        output="Audio",
        speakers=QWEN_CUSTOM_VOICES,
        tts_mode="preset",
    ),
    _m(
        "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign",
        "Text-to-Speech",
        "tts",
        5,
        8,
        params="1.7B",
        total_size=2443149780,
        output="Audio",
        tts_mode="design",
    ),
    _m(
        "Qwen/Qwen3-TTS-12Hz-1.7B-Base",
        "Text-to-Speech",
        "tts",
        5,
        8,
        params="1.7B",
        total_size=2443149780,
        output="Audio",
        supported=("Voice Cloning",),
        tts_mode="clone",
    ),
    _m(
        "OpenMOSS/MOSS-TTS-Nano-100M",
        "Text-to-Speech",
        "tts",
        1,
        3,
        params="0.1B",
        total_size=220000000,
        output="Audio",
        speakers=("default",),
        tts_mode="preset",
    ),
    _m(
        "microsoft/VibeVoice-1.5B",
        "Text-to-Speech",
        "tts",
        8,
        10,
        params="1.5B",
        total_size=3200000000,
        output="Audio",
        supported=("Voice Cloning",),
        tts_mode="clone",
    ),
    _m(
        "microsoft/VibeVoice-Realtime-0.5B",
        "Text-to-Speech",
        "tts",
        3,
        5,
        params="0.5B",
        total_size=1100000000,
        output="Audio",
        speakers=VIBEVOICE_RT_SPEAKERS,
        tts_mode="preset",
    ),
    _m(
        SUPERTONIC_ID,
        "Text-to-Speech",
        "tts",
        0,
        3,
        params="0.1B",
        total_size=1032671056,
        output="Audio",
        speakers=SUPERTONIC_VOICES,
        tts_mode="broken",
    ),
    # ASR, embeddings, rerank, OCR (listed so the catalogue looks like a real device; not emulated deeply).
    _m("Qwen/Qwen3-ASR-1.7B", "ASR", "asr", 7, 8, params="1.7B", total_size=3600000000, input="Audio"),
    _m("FireRedTeam/Firered-ASR2-LLM", "ASR", "asr", 6, 8, total_size=3100000000, input="Audio"),
    _m(
        "Qwen/Qwen3-Embedding-0.6B",
        "Text Embedding",
        "embed",
        1,
        4,
        params="0.6B",
        total_size=900000000,
        output="Vector",
    ),
    _m(
        "tencent/R3-embedding-0.6b",
        "Text Embedding",
        "embed",
        4,
        4,
        params="0.6B",
        total_size=756288553,
        output="Vector",
    ),
    _m(
        "Qwen/Qwen3-Reranker-0.6B",
        "Text Reranking",
        "rerank",
        2,
        4,
        params="0.6B",
        total_size=700000000,
        output="Score",
    ),
    _m("zai-org/GLM-OCR", "Image-to-Text", "ocr", 4, 6, params="0.9B", total_size=1885468032, input="Image"),
    _m("PaddlePaddle/PP-OCRv6-Small", "Image-to-Text", "ocr", 1, 3, total_size=120000000, input="Image"),
    _m("PaddlePaddle/PP-OCRv6-Medium", "Image-to-Text", "ocr", 2, 3, total_size=260000000, input="Image"),
    # Video and 3D (API doc; units and 3D load time assumed).
    _m(
        VIDEO_MODEL_ID,
        "Text-to-Video",
        "video",
        45,
        5,
        params="13B",
        total_size=26400000000,
        input="Text,Image",
        output="Video,Audio",
        supported=("Image to Video", "Audio"),
        desc="MiniMax-H3-Turbo video with audio; fixed canvases, up to 7 s",
    ),
    _m(
        HUNYUAN_ID,
        "Image-to-3D",
        "3d",
        30,
        40,
        params="3.3B",
        total_size=14800000000,
        input="Image",
        output="3D",
        desc="Hunyuan3D 2.1 stages: shape, simplify, texture, export",
    ),
)

MODELS: dict[str, ModelSpec] = {m.model_id: m for m in CATALOG}


# ----- video ------------------------------------------------------------------------------------------

VIDEO_CANVASES: tuple[tuple[int, int], ...] = ((1344, 768), (768, 1344), (832, 480), (480, 832))
VIDEO_STEP_OPTIONS: tuple[int, ...] = (4, 5, 6, 7, 8)
VIDEO_DEFAULT_STEPS = 7
VIDEO_FPS = 24
VIDEO_MAX_KEYFRAMES = 2
VIDEO_AUDIO = {"sample_rate": 32000, "channels": 2}
VIDEO_MAX_SECONDS = 7
VIDEO_GATEWAY_LIMIT_S = 3600.0  # renders are cut off (reported failed) after one hour

# Anchor renders measured on MiniMax-H3-Turbo (API doc): (width, height, seconds, steps) -> device seconds.
VIDEO_ANCHORS: tuple[tuple[int, int, float, int, float], ...] = (
    (832, 480, 2, 4, 7 * 60),
    (832, 480, 7, 4, 12 * 60),
    (1344, 768, 5, 4, 32 * 60),
)

_BASE_PIXELS = 832 * 480
_FIXED_S = 60.0  # model warm-up, prompt encoding, muxing: independent of size, length and steps
_PER_STEP_S = 15.0  # one denoising step over one "equivalent second" at 832x480
_LEAD_SECONDS = 4.0  # conditioning/VAE latents every clip carries, in video-seconds
# Cost grows faster than pixel count (attention over more tokens); solved from the 1344x768 anchor:
# 60 + 15*4*(1344*768/832/480)^p*(5+4) = 1920  =>  (px ratio)^p = 31/9.
_PIXEL_EXPONENT = math.log(31 / 9) / math.log((1344 * 768) / _BASE_PIXELS)  # ≈ 1.302


def video_render_seconds(width: int, height: int, seconds: float, steps: int) -> float:
    """Device seconds MiniMax-H3-Turbo needs for one render.

        T = 60 + 15 * steps * (width*height / (832*480)) ** 1.302 * (seconds + 4)

    Passes exactly through the API doc's three anchors (2 s/832x480/4 steps = 7 min, 7 s/832x480/4 = 12
    min, 5 s/1344x768/4 = 32 min), is linear in steps and clip length, and puts 1344x768/7 s/8 steps at
    ~77 min, i.e. past the one-hour gateway limit as the doc observed.
    """
    pixel_factor = (width * height / _BASE_PIXELS) ** _PIXEL_EXPONENT
    return _FIXED_S + _PER_STEP_S * steps * pixel_factor * (seconds + _LEAD_SECONDS)


# ----- other work (device seconds) ---------------------------------------------------------------------


def image_seconds(width: int, height: int, steps: int) -> float:
    """Z-Image-Turbo: ~7.9 s for 512x512 at 8 steps (field notes §7.2), linear in pixels and steps."""
    return max(1.0, 7.9 * (width * height) / (512 * 512) * steps / 8)


def speech_seconds(audio_seconds: float) -> float:
    return 0.5 + audio_seconds / 2.1  # Supertone ran at 2.1x real time (field notes §7.2)


def music_loop_seconds(audio_seconds: float) -> float:
    return 68.0 * audio_seconds / 20.0  # Foundation-1: 20 s of audio in ~68 s (field notes §8.2)


def song_seconds(audio_seconds: float) -> float:
    return 20.0 + 1.5 * audio_seconds  # assumed: SongGeneration renders a bit slower than real time


THREE_D_STAGE_SECONDS: dict[str, float] = {
    "shape": 7 * 60.0,  # API doc: "3D shape (Hunyuan3D-2.1, ~7 min)"
    "simplify": 40.0,  # assumed
    "texture": 9 * 60.0,  # assumed
    "export": 15.0,  # assumed
    "background": 10.0,  # assumed (fails anyway while the hunyuan_background quirk is on)
}


def chat_seconds(prompt_tokens: int, completion_tokens: int) -> float:
    return prompt_tokens / 790.0 + completion_tokens / 27.4  # Qwen3.6-35B-A3B (API doc "Chat speed")
