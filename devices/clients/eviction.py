"""Which models to unload before a Tiiny load: the decision alone, no I/O (``TiinyClient._make_room`` asks the
device, calls ``plan_eviction`` and carries the plan out).

The rules (reference quirks, "fake fit"):

* Nothing else loaded or loading: nothing to unload (and the device is not even asked whether it fits).
* ``exclusive`` (the job wants the device to itself): every other model goes.
* Otherwise the device's fit answer decides: when it says unload, exactly the models it names go (all the
  others when it names none). Only when the NPU would still be left nearly full after that (available + freed −
  needed < ``NPU_MARGIN``) do more models go, largest first, until the margin holds: on a nearly full NPU the
  device answers "fits" and then never starts the load.
* ``polite``: if a model to unload was not loaded by the hub (someone else's), nothing is touched; the plan
  names the blocking models instead.
* When every other model goes anyway, one ``unload_all`` replaces a (slow) ``stop`` per model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from devices.capabilities import NPU_MARGIN


@dataclass(frozen=True)
class FitAnswer:
    """The device's answer to "does it fit?" (``unload_candidate``), its missing numbers filled in from the NPU
    views: whether it says unload, whom it names, the units the wanted model needs and the units free now."""

    unload_required: bool
    named: tuple[str, ...] = ()
    npu_needed: int = 0
    npu_available: int = 0


@dataclass(frozen=True)
class DeviceHolds:
    """What the device holds (running and loading models, in its order), which of them the hub loaded itself,
    and its fit answer (None when it was not asked: see ``needs_fit_answer``)."""

    running: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()
    hub_loaded: frozenset[str] = frozenset()
    fit: FitAnswer | None = None

    def others(self, model_id: str) -> list[str]:
        """Every loaded or loading model but ``model_id``: the ones that could be unloaded for it."""
        return [m for m in self.running + self.pending if m != model_id]


@dataclass(frozen=True)
class WantedModel:
    """The model to load and how: ``polite`` = never unload someone else's model, ``exclusive`` = unload every
    other model (the job wants the device to itself)."""

    model_id: str
    polite: bool = False
    exclusive: bool = False


@dataclass(frozen=True)
class EvictionPlan:
    """The models to unload, in order; ``unload_all`` when they are every other model (one call does it);
    ``blocking``: a polite load would have to unload these models of someone else, so nothing is touched."""

    evict: tuple[str, ...] = ()
    unload_all: bool = False
    blocking: tuple[str, ...] = ()


def needs_fit_answer(holds: DeviceHolds, wanted: WantedModel) -> bool:
    """Whether the plan needs the device's fit answer: only when something else is loaded (an empty NPU is no
    "fake fit") and the load is not exclusive (then everything goes regardless)."""
    return bool(holds.others(wanted.model_id)) and not wanted.exclusive


def plan_eviction(holds: DeviceHolds, wanted: WantedModel, costs: Mapping[str, int]) -> EvictionPlan:
    """What to unload before loading ``wanted``. ``costs``: NPU units each loaded model frees when unloaded
    (unknown = 0). Pure: the caller asks the device and carries the plan out."""
    others = holds.others(wanted.model_id)
    if not others:
        return EvictionPlan()
    if wanted.exclusive:
        evict = list(others)
    elif holds.fit is None:
        evict = []  # not asked: taken as "fits"
    else:
        evict = _named(holds.fit, others, wanted.model_id)
        evict += _for_margin(holds.fit, others, evict, costs)
    evict = [m for m in dict.fromkeys(evict) if m != wanted.model_id]
    foreign = [m for m in evict if m not in holds.hub_loaded] if wanted.polite else []
    return EvictionPlan(
        evict=tuple(evict),
        unload_all=bool(evict) and set(others) <= set(evict),
        blocking=tuple(foreign),
    )


def _named(fit: FitAnswer, others: list[str], model_id: str) -> list[str]:
    """The models the device says must go; all the others when it says unload without naming whom."""
    if not fit.unload_required:
        return []
    return [m for m in fit.named if m != model_id] or list(others)


def _for_margin(fit: FitAnswer, others: list[str], evict: list[str], costs: Mapping[str, int]) -> list[str]:
    """More models, largest first, while the NPU would be left with less than ``NPU_MARGIN`` units to spare
    once ``evict`` is gone and the wanted model is loaded."""
    freed = fit.npu_available + sum(costs.get(m, 0) for m in evict)
    more: list[str] = []
    for m in sorted((m for m in others if m not in evict), key=lambda x: -costs.get(x, 0)):
        if freed - fit.npu_needed >= NPU_MARGIN:
            break
        more.append(m)
        freed += costs.get(m, 0)
    return more
