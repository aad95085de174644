"""Presets: named settings for one kind, a person's own or the household's (``jobs.models.Preset``).

One place for every rule about them, asked by the pages, REST and /v1 alike:
- which fields a preset of a kind may hold (``preset_fields``: the kind's form fields on any device kind, without
  files, the per-job ``not_before`` and ``lift_limits``), and its values checked against those fields at save
  (``clean_values``; a model, size or voice a device lacks is refused at use, by the usual submit check);
- who sees and changes which (``presets_visible_to``, ``preset_for``, ``may_change``): one's own and the
  household's; the household's are changed by admins only; nobody sees another person's;
- which preset a name means (``find_preset``: one's own before the household's) and how it meets a request
  (``with_preset``: its values are defaults, the request's own fields win);
- export and import (``presets_export``, ``presets_import``: all or nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.http import Http404

from devices.models import Device
from jobs.kinds.table import SPECS
from jobs.models import JobKind, Preset
from jobs.queue.admission import RequestInvalid

#: The fields that hold what to make rather than how: kept only when the person asks for it.
PROMPT_FIELDS = frozenset({"prompt", "input", "caption", "lyrics"})
#: Never kept: a time that will have passed, an admin's one-job exception, and the words of a file not kept.
NEVER_KEPT = frozenset({"not_before", "lift_limits", "ref_text"})
NAME_MAX = 80
#: The longest text any form field takes (a song's lyrics); a field a device fills in (a model) is held to it too.
TEXT_MAX = 6000
#: Import's ceiling: a file of presets, not a data dump.
IMPORT_MAX = 200
EXPORT_FORMAT = "tiiny-hub-presets/1"


def _no_preset(kind: str, name: str) -> str:
    return f"No {JobKind(kind).label.lower()} preset “{name[:NAME_MAX]}” of yours or the household's."


# -- the fields -------------------------------------------------------------------------------------------------


@cache
def preset_fields(kind: str) -> dict[str, tuple[forms.Field, ...]]:
    """The fields a ``kind`` preset may hold: each name with its field on every device kind's form that has it."""
    out: dict[str, list[forms.Field]] = {}
    for spec in SPECS:
        if spec.kind != kind:
            continue
        form = spec.form(device=Device(kind=spec.device_kind, capabilities={}))
        for name, field in form.fields.items():
            if isinstance(field, forms.FileField) or name in NEVER_KEPT:
                continue
            # A choice the device fills in (models, sizes, steps, voices) is judged at use, on the device.
            static = bool(getattr(spec.form.base_fields.get(name), "choices", None))
            out.setdefault(name, []).append(field if static or not hasattr(field, "choices") else None)
    return {name: tuple(fields) for name, fields in out.items()}


def _check_value(name: str, value: Any, fields: tuple[forms.Field | None, ...]) -> str:
    """Why ``value`` can't be kept for ``name`` ("" when some device kind's form takes it)."""
    if not isinstance(value, (str, int, float, bool)) or (isinstance(value, float) and value != value):
        return "Give a text, a number or true/false."
    if isinstance(value, str) and len(value) > TEXT_MAX:
        return f"At most {TEXT_MAX:,} characters."
    why = ""
    for field in fields:
        if field is None:
            return ""
        try:
            field.clean(value)
            return ""
        except ValidationError as exc:
            why = why or " ".join(exc.messages)
    return why


def clean_values(kind: str, values: Any) -> dict[str, Any]:
    """``values`` checked against the kind's form fields: ``RequestInvalid`` naming each unknown field and each
    value no form of the kind would take; a value left empty (None, "") is dropped."""
    if kind not in JobKind.values:
        raise RequestInvalid({"kind": [f"Unknown kind; one of {', '.join(JobKind.values)}."]})
    if not isinstance(values, Mapping):
        raise RequestInvalid({"values": ['Give the settings as an object, e.g. {"steps": 20}.']})
    known = preset_fields(kind)
    errors: dict[str, list[str]] = {}
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name not in known:
            shown = ", ".join(sorted(known))
            label = JobKind(kind).label.lower()
            errors[str(name)] = [f"Unknown field for {label} presets; its fields are: {shown}."]
        elif value is not None and value != "":
            if why := _check_value(name, value, known[name]):
                errors[name] = [why]
            else:
                out[name] = value
    if errors:
        raise RequestInvalid(errors)
    return out


def values_from_form(kind: str, data: Mapping[str, Any], *, keep_prompt: bool = False) -> dict[str, Any]:
    """A new-job form's posted fields as a preset's values (unchecked): the kind's fields only, a checkbox left
    unticked as false, the prompt only with ``keep_prompt``."""
    out: dict[str, Any] = {}
    for name, fields in preset_fields(kind).items():
        if name in PROMPT_FIELDS and not keep_prompt:
            continue
        if any(isinstance(f, forms.BooleanField) for f in fields if f is not None):
            out[name] = data.get(name) not in (None, "", "false", "False", "0", "off")
        elif data.get(name) not in (None, ""):
            out[name] = data.get(name)
    return out


# -- who sees and changes which ---------------------------------------------------------------------------------


def presets_visible_to(user: Any, kind: str | None = None) -> QuerySet[Preset]:
    """One's own presets and the household's (never another person's), by kind and name."""
    qs = Preset.objects.filter(Q(owner__isnull=True) | Q(owner_id=getattr(user, "pk", None)))
    if kind is not None:
        qs = qs.filter(kind=kind)
    return qs.order_by("kind", "name", "owner_id")


def preset_for(user: Any, pk: Any) -> Preset:
    """A preset ``user`` may see, or 404 (another person's is "No such preset.", exactly like a missing one)."""
    preset = presets_visible_to(user).filter(pk=pk).first() if isinstance(pk, int) else None
    if preset is None:
        raise Http404("No such preset.")
    return preset


def may_change(user: Any, preset: Preset) -> bool:
    if preset.owner_id is None:
        return bool(getattr(user, "is_admin", False))
    return preset.owner_id == getattr(user, "pk", None)


def _require_change(user: Any, preset: Preset) -> None:
    if not may_change(user, preset):
        raise PermissionDenied("Only admins change the household's presets.")


def presets_in_effect(user: Any, kind: str) -> list[Preset]:
    """The ``kind`` presets a name can mean for ``user``: a household preset hidden by one's own of its name."""
    presets = list(presets_visible_to(user, kind))
    own = {p.name for p in presets if p.owner_id is not None}
    return [p for p in presets if p.owner_id is not None or p.name not in own]


def find_preset(owner: Any, kind: str, name: str) -> Preset | None:
    """The ``kind`` preset called ``name``: one's own before the household's."""
    found = list(presets_visible_to(owner, kind).filter(name=name))
    return next((p for p in found if p.owner_id is not None), found[0] if found else None)


def with_preset(*, owner: Any, kind: str, name: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` over the named preset's values (the request's own fields win); ``data`` itself when no preset is
    named. ``RequestInvalid`` naming ``preset`` when there is no such preset for the kind."""
    if name in (None, ""):
        return dict(data)
    if not isinstance(name, str):
        raise RequestInvalid({"preset": ["Give the preset's name as text."]})
    preset = find_preset(owner, kind, name.strip())
    if preset is None:
        raise RequestInvalid({"preset": [_no_preset(kind, name.strip())]})
    return {**preset.values, **data}


# -- changes --------------------------------------------------------------------------------------------------


def _clean_name(name: Any) -> str:
    text = " ".join(str(name or "").split()) if isinstance(name, (str, type(None))) else ""
    if not text:
        raise RequestInvalid({"name": ["Give the preset a name."]})
    if len(text) > NAME_MAX:
        raise RequestInvalid({"name": [f"Keep the name to {NAME_MAX} characters."]})
    return text


def _taken(owner_id: int | None, kind: str, name: str, *, but: int | None = None) -> bool:
    qs = Preset.objects.filter(owner_id=owner_id, kind=kind, name=name)
    return qs.exclude(pk=but).exists() if but else qs.exists()


def _name_taken(kind: str, name: str, household: bool) -> RequestInvalid:
    whose = "The household already has" if household else "You already have"
    label = JobKind(kind).label.lower()
    article = "an" if label[0] in "aeiou" else "a"
    return RequestInvalid({"name": [f"{whose} {article} {label} preset “{name}”."]})


def preset_create(
    *, by: Any, kind: str, name: Any, values: Any, household: bool = False, replace: bool = False
) -> Preset:
    """A new preset (``household``: the household's, admins only), its values checked (``clean_values``). With
    ``replace`` an existing one of the same name and kind takes the new values instead of refusing."""
    if household and not getattr(by, "is_admin", False):
        raise PermissionDenied("Only admins make the household's presets.")
    if not getattr(by, "can_submit", False):
        raise PermissionDenied("Viewers can watch but not keep presets.")
    name = _clean_name(name)
    cleaned = clean_values(kind, values)
    owner_id = None if household else by.pk
    existing = Preset.objects.filter(owner_id=owner_id, kind=kind, name=name).first()
    if existing is not None:
        if not replace:
            raise _name_taken(kind, name, household)
        existing.values = cleaned
        existing.save(update_fields=["values", "updated"])
        return existing
    try:
        with transaction.atomic():
            return Preset.objects.create(owner_id=owner_id, kind=kind, name=name, values=cleaned)
    except IntegrityError:  # the same name made at the same moment by another request
        raise _name_taken(kind, name, household) from None


def preset_update(*, preset: Preset, by: Any, name: Any = None, values: Any = None) -> Preset:
    """A new name and/or new values (checked as at create); what is None stays."""
    _require_change(by, preset)
    fields = []
    if values is not None:
        preset.values = clean_values(preset.kind, values)
        fields.append("values")
    if name is not None:
        name = _clean_name(name)
        if name != preset.name and _taken(preset.owner_id, preset.kind, name, but=preset.pk):
            raise _name_taken(preset.kind, name, preset.household)
        preset.name = name
        fields.append("name")
    if not fields:
        return preset
    try:
        with transaction.atomic():
            preset.save(update_fields=[*fields, "updated"])
    except IntegrityError:  # the same name taken at the same moment by another request
        raise _name_taken(preset.kind, name, preset.household) from None
    return preset


def preset_delete(*, preset: Preset, by: Any) -> None:
    _require_change(by, preset)
    preset.delete()


# -- export and import ------------------------------------------------------------------------------------------


def preset_out(preset: Preset) -> dict[str, Any]:
    """A preset as export and import know it."""
    return {"name": preset.name, "kind": preset.kind, "values": dict(preset.values)}


def presets_export(presets: list[Preset]) -> dict[str, Any]:
    return {"format": EXPORT_FORMAT, "presets": [preset_out(p) for p in presets]}


def _import_items(payload: Any) -> list[Any]:
    """The presets of an import: ``{"presets": [...]}`` (what export writes), a list, or one preset."""
    if isinstance(payload, Mapping) and "presets" in payload:
        extra = sorted(set(payload) - {"presets", "format"})
        if extra:
            raise RequestInvalid({extra[0]: ['Unknown field; an import has "presets" (and "format").']})
        items = payload["presets"]
    elif isinstance(payload, Mapping):
        items = [payload]
    else:
        items = payload
    if not isinstance(items, list) or not items:
        raise RequestInvalid(
            {"presets": ['Give a list of presets: {"presets": [{"name", "kind", "values"}]}.']}
        )
    if len(items) > IMPORT_MAX:
        raise RequestInvalid({"presets": [f"Import at most {IMPORT_MAX} presets at a time."]})
    return items


def _import_one(item: Any, where: str) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(item, Mapping):
        raise RequestInvalid({where: ['Each preset is an object: {"name", "kind", "values"}.']})
    unknown = sorted(set(item) - {"name", "kind", "values"})
    if unknown:
        raise RequestInvalid(
            {f"{where}.{unknown[0]}": ['Unknown field; a preset has "name", "kind" and "values".']}
        )
    kind = item.get("kind")
    if kind not in JobKind.values:
        raise RequestInvalid({f"{where}.kind": [f"Unknown kind; one of {', '.join(JobKind.values)}."]})
    try:
        name = _clean_name(item.get("name"))
    except RequestInvalid as exc:
        raise RequestInvalid({f"{where}.name": exc.errors["name"]}) from None
    try:
        values = clean_values(kind, item.get("values", {}))
    except RequestInvalid as exc:
        on = f"{where}.values"
        raise RequestInvalid(
            {on if k == "values" else f"{on}.{k}": v for k, v in exc.errors.items()}
        ) from None
    return kind, name, values


def presets_import(*, by: Any, payload: Any, household: bool = False) -> list[Preset]:
    """Every preset of ``payload`` checked first, then all saved in one transaction (a preset of the same name and
    kind takes the imported values); ``RequestInvalid`` naming each bad one (``presets[2].values.steps``) and
    nothing saved."""
    items = _import_items(payload)
    errors: dict[str, list[str]] = {}
    good: dict[tuple[str, str], dict[str, Any]] = {}
    for i, item in enumerate(items):
        try:
            kind, name, values = _import_one(item, f"presets[{i}]")
        except RequestInvalid as exc:
            errors.update(exc.errors)
            continue
        good[(kind, name)] = values
    if errors:
        raise RequestInvalid(errors)
    with transaction.atomic():
        return [
            preset_create(by=by, kind=kind, name=name, values=values, household=household, replace=True)
            for (kind, name), values in good.items()
        ]


__all__ = [
    "clean_values",
    "EXPORT_FORMAT",
    "find_preset",
    "may_change",
    "PROMPT_FIELDS",
    "preset_create",
    "preset_delete",
    "preset_fields",
    "preset_for",
    "preset_out",
    "preset_update",
    "presets_export",
    "presets_import",
    "presets_in_effect",
    "presets_visible_to",
    "values_from_form",
    "with_preset",
]
