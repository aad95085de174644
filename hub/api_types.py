"""Field types the REST API shares across apps, declared in the OpenAPI schema exactly as they are sent."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import PlainSerializer, WithJsonSchema

#: A wall-clock time in the hub's time zone, sent as "07:00:00". JSON Schema's ``format: time`` is RFC 3339's
#: full-time, which needs an offset ("07:00:00Z"); these times have none (the household's night starts at 23:00
#: whatever the season), so the schema says what is sent: a pattern, no format.
LocalTime = Annotated[
    dt.time,
    PlainSerializer(lambda t: t.strftime("%H:%M:%S"), return_type=str),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$",
            "description": "A local time of day in the hub's time zone (HH:MM:SS, no offset).",
            "examples": ["07:00:00"],
        }
    ),
]
