"""OpenAI-compatible routes under /v1/: videos, images, speech and models, as the official SDK calls them.

A request becomes a Job in the same single lane as everyone's (``jobs.admission``), under the same rules.
"""

from __future__ import annotations

from ninja import NinjaAPI

v1 = NinjaAPI(title="Tiiny Hub: OpenAI-compatible API", version="1", urls_namespace="v1", docs_url=None)
