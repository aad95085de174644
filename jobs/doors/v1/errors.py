"""/v1's errors in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``, whatever went wrong."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent, ValidationError
from django.http import Http404, HttpResponse, JsonResponse, UnreadablePostError
from django.http.multipartparser import MultiPartParserError

from hub.accounts.tokens import TokenInvalid
from jobs.queue.admission import RequestInvalid

log = logging.getLogger("jobs.doors.v1")

PARAM_OF = {
    "start_image": "input_reference",
    "width": "size",
    "height": "size",
    "frames": "seconds",
    "ts_steps": "steps",
    "instruct": "instructions",
    "kind": "model",
}


class V1Error(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        response = JsonResponse(body, status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        if self.status != 429:
            # The SDK retries 408/409/5xx by itself; a retried submit would queue a second job.
            response["x-should-retry"] = "false"
        return response


def not_found(message: str) -> V1Error:
    return V1Error(404, message, code="not_found")


# complexity: one table of failures and their OpenAI-shaped answers, read top to bottom
def translate(exc: Exception) -> HttpResponse:
    if isinstance(exc, V1Error):
        return exc.response()
    if isinstance(exc, TokenInvalid):
        return V1Error(401, exc.message, code="invalid_api_key").response()
    if isinstance(
        getattr(exc, "v1", None), V1Error
    ):  # a pool's one reason, in /v1's own words (fields.DeviceCant)
        return exc.v1.response()
    if isinstance(exc, RequestInvalid):
        field, message = exc.first()
        return V1Error(400, message, param=PARAM_OF.get(field or "", field)).response()
    if isinstance(exc, PermissionDenied):
        return V1Error(403, str(exc) or "You may not do this.", code="permission_denied").response()
    if isinstance(exc, Http404):
        return not_found(str(exc) or "Not found.").response()
    if isinstance(exc, ValidationError):
        field = next(iter(exc.message_dict), None) if hasattr(exc, "error_dict") else None
        message = " ".join(exc.messages) or "The request is not valid."
        return V1Error(400, message, param=None if field == "__all__" else field).response()
    if isinstance(exc, (RequestDataTooBig, TooManyFieldsSent)):
        return V1Error(413, "The request body is too large.", code="request_too_large").response()
    if isinstance(exc, (MultiPartParserError, UnreadablePostError)):  # e.g. multipart without a boundary
        return V1Error(400, f"We could not read the request body: {exc}", code="invalid_body").response()
    log.exception("unexpected error in /v1")
    return V1Error(
        500, "The hub failed on this request; the admin can find it in the log.", type="server_error"
    ).response()
