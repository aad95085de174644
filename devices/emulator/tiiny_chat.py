"""Minimal llama.cpp-style chat for the emulated Tiiny: enough for a hub to prove a chat model answers.

Non-streaming replies carry `usage` and `timings`; streaming follows the OpenAI format and, with the
`chat_usage_chunk` quirk, ends with a chunk whose `choices` list is empty (API doc "Known quirks").
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Protocol

from starlette.responses import JSONResponse, Response, StreamingResponse

from devices.emulator import catalog
from devices.emulator.tiiny_replies import oai_error
from devices.emulator.tiiny_state import DeviceState, Instance


class ChatHost(Protocol):
    """What the chat needs of the emulated device (``tiiny.TiinyApp``): its state and a way to infer."""

    state: DeviceState

    async def _infer(self, inst: Instance, device_seconds: float) -> None: ...


def _reply_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    last = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), {})
    content = last.get("content", "")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return f"(emulated Tiiny) You said: {str(content)[:200]}"


async def complete(app: ChatHost, inst: Instance, body: dict[str, Any]) -> Response:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise oai_error(400, "messages is required", param="messages")
    text = _reply_text(body)
    prompt_tokens = sum(len(json.dumps(m)) // 4 for m in messages)
    completion_tokens = max(1, len(text) // 4)
    await app._infer(inst, catalog.chat_seconds(prompt_tokens, completion_tokens))
    cid, created, model = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time()), inst.spec.model_id
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    if not body.get("stream"):
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": "b9803",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                ],
                "usage": usage,
            }
        )
    include_usage = app.state.q("chat_usage_chunk") or bool(
        (body.get("stream_options") or {}).get("include_usage")
    )

    async def events() -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(payload)}\n\n".encode()

        yield chunk({"role": "assistant", "content": None})
        for word in text.split(" "):
            yield chunk({"content": word + " "})
        yield chunk({}, "stop")
        if include_usage:
            tail = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
            yield f"data: {json.dumps(tail)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
