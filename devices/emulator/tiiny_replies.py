"""How the emulated Tiiny answers at once with an error: the envelopes of its gateway (OpenAI style) and of its
management API, shared by the app (``tiiny``) and the chat (``tiiny_chat``)."""

from __future__ import annotations

from typing import Any


class Reply(Exception):
    """Raise to answer at once with `status` and a JSON `body` (validation failures, quirks)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status, self.body = status, body


def oai_error(status: int, message: str, type_: str = "invalid_request_error", **extra: Any) -> Reply:
    return Reply(status, {"error": {"message": message, "type": type_, **extra}})


def mgmt_error(status: int, msg: str, detail: str) -> Reply:
    return Reply(status, {"code": status, "msg": msg, "detail": detail})
