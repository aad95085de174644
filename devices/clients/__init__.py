"""Device clients: the only code that speaks a device protocol."""

from __future__ import annotations

from typing import Any

from devices.clients.tensorsharp import TensorSharpClient
from devices.clients.tiiny import LoadResult, Reading, RunningModels, TiinyClient

#: The one client class per device kind (``Device.Kind``).
CLIENTS: dict[str, type[TiinyClient] | type[TensorSharpClient]] = {
    "tiiny": TiinyClient,
    "tensorsharp": TensorSharpClient,
}


def client_for(device: Any, **kw: Any) -> TiinyClient | TensorSharpClient:
    """The right client for a ``Device`` row (by ``device.kind``), for the metric poller and the job engine alike."""
    return CLIENTS[device.kind].for_device(device, **kw)


__all__ = [
    "LoadResult",
    "Reading",
    "RunningModels",
    "TensorSharpClient",
    "TiinyClient",
    "CLIENTS",
    "client_for",
]
