"""The one error shape of the REST API (``hub.api`` answers every error with it), for every app's routes.

It lives in hub's base, below every app, so the devices, jobs and notify routers can all name it in their
OpenAPI responses without importing each other.
"""

from __future__ import annotations

from ninja import Schema
from pydantic import Field


class ErrorOut(Schema):
    detail: str = Field(description="A sentence a person understands.")
    errors: dict[str, list[str]] | None = Field(
        default=None,
        description="Per field (the form's field names; `__all__` for the request as a whole): the messages.",
    )


#: The errors any route may answer (``response={200: ..., **ERRORS}``).
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 413: ErrorOut, 422: ErrorOut}
