"""Device clients: the only code that speaks a device protocol."""

from __future__ import annotations

from typing import Any

from devices.clients.tensorsharp import TensorSharpClient
from devices.clients.tiiny import LoadResult, Reading, RunningModels, TiinyClient


def client_for(device: Any, **kw: Any) -> TiinyClient | TensorSharpClient:
    """The right client for a ``Device`` row (by ``device.kind``)."""
    if device.kind == "tensorsharp":
        return TensorSharpClient.for_device(device, **kw)
    return TiinyClient.for_device(device, **kw)


__all__ = ["LoadResult", "Reading", "RunningModels", "TensorSharpClient", "TiinyClient", "client_for"]
