"""Device clients: the only code that speaks a device protocol.

A client knows its device's protocol and nothing of the hub: what it must tell the hub (a request sent, a load's
time) it is handed as callbacks (``devices.services.client_for`` builds a client for a ``Device`` row).
"""

from __future__ import annotations

from devices.clients.tensorsharp import TensorSharpClient
from devices.clients.tiiny import LoadResult, Reading, RunningModels, TiinyClient

#: The one client class per device kind (``Device.Kind``).
CLIENTS: dict[str, type[TiinyClient] | type[TensorSharpClient]] = {
    "tiiny": TiinyClient,
    "tensorsharp": TensorSharpClient,
}

__all__ = [
    "LoadResult",
    "Reading",
    "RunningModels",
    "TensorSharpClient",
    "TiinyClient",
    "CLIENTS",
]
