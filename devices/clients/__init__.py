"""Device clients: the only code that speaks a device protocol."""

from __future__ import annotations

import functools
from typing import Any

from devices.clients.tensorsharp import TensorSharpClient
from devices.clients.tiiny import LoadResult, Reading, RunningModels, TiinyClient

#: The one client class per device kind (``Device.Kind``).
CLIENTS: dict[str, type[TiinyClient] | type[TensorSharpClient]] = {
    "tiiny": TiinyClient,
    "tensorsharp": TensorSharpClient,
}


def client_for(device: Any, *, note_asked: bool = True, **kw: Any) -> TiinyClient | TensorSharpClient:
    """The right client for a ``Device`` row (by ``device.kind``), for the metric poller and the job engine alike.

    ``note_asked``: every request it sends is noted (``devices.services.device_note_asked``), so the metric
    poller's optional tick gives way to it; the poller's own client passes False.
    """
    client = CLIENTS[device.kind].for_device(device, **kw)
    if getattr(device, "pk", None) is None:
        return client
    from devices.services import device_load_seconds, device_note_asked, device_note_load_seconds

    if note_asked:
        client.on_request = functools.partial(device_note_asked, device.pk)
    if isinstance(client, TiinyClient):
        # A load is polled by how near its expected end is; every load the hub launches teaches that time. The
        # learned times (a cache read) are read only when a load needs them: most job steps load nothing.
        client.expect_load_seconds(functools.partial(device_load_seconds, device))
        client.on_loaded = functools.partial(device_note_load_seconds, device.pk)
    return client


__all__ = [
    "LoadResult",
    "Reading",
    "RunningModels",
    "TensorSharpClient",
    "TiinyClient",
    "CLIENTS",
    "client_for",
]
