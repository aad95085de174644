"""Messages that name the allowed values, and new bounds for a number field once the form knows its model."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

# -- messages that name the allowed values -----------------------------------------------------------------------
# Django's generic messages ("Select a valid choice", "Ensure this value is less than or equal to 240") don't
# say what would do. Every field of every form gets one that does ("Steps: 10 to 250"), from its own bounds,
# choices and length; a form sets its own where the device's rule is sharper (``set_range``, or an explicit
# ``error_messages`` entry, which the generic pass leaves alone).
REQUIRED_MESSAGES = {
    "model": "A model is required: choose one.",
    "prompt": "A prompt is required: what should it show?",
    "input": "The text to speak is required.",
    "image": "A picture is required (PNG, JPEG or WebP).",
    "seconds": "The length in seconds is required.",
}


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _pct(text: Any) -> str:
    """Literal text inside a message Django %-formats with its params."""
    return str(text).replace("%", "%%")


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def span(values: list[int]) -> str:
    """``4 to 8`` for a run of whole numbers, else ``4, 6 or 8``."""
    values = sorted(values)
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]} to {values[-1]}"
    return _or([str(v) for v in values])


def set_range(field: forms.Field, lo: Any, hi: Any, message: str) -> None:
    """New bounds for a number field after the form is built (they depend on the model): the validators, the
    input's ``min``/``max`` and every message about them agree."""
    field.min_value, field.max_value = lo, hi
    field.validators = [
        v for v in field.validators if not isinstance(v, (MinValueValidator, MaxValueValidator))
    ]
    if lo is not None:
        field.validators.append(MinValueValidator(lo))
        field.widget.attrs["min"] = lo
    if hi is not None:
        field.validators.append(MaxValueValidator(hi))
        field.widget.attrs["max"] = hi
    for code in ("min_value", "max_value", "invalid"):
        field.error_messages[code] = message


def _defaults(field: forms.Field) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cls in reversed(type(field).__mro__):
        out.update(getattr(cls, "default_error_messages", {}))
    return out


def _generic_messages(name: str, field: forms.Field) -> dict[str, str]:
    label = _pct(field.label or name.replace("_", " ").capitalize())
    out = {"required": _pct(REQUIRED_MESSAGES.get(name) or f"“{label}” is required.")}
    out.update(_value_messages(label, field))
    if isinstance(field, forms.CharField) and field.max_length:
        out["max_length"] = f"{label}: at most {field.max_length} characters (this has %(show_value)d)."
    return out


def _value_messages(label: str, field: forms.Field) -> dict[str, str]:
    """The messages about a value of the field's type: its bounds, its choices, its format."""
    if isinstance(field, (forms.IntegerField, forms.FloatField)):
        return _number_messages(label, field)
    if isinstance(field, forms.ChoiceField):
        names = [_pct(text) for value, text in field.choices if value not in ("", None)]
        return {"invalid_choice": f"{label}: choose {_or(names)}."} if names else {}
    if isinstance(field, forms.DateTimeField):
        return {"invalid": f"{label}: a date and time, e.g. 2026-12-01 23:00."}
    if isinstance(field, forms.FileField):
        return {"missing": f"{label}: choose a file.", "invalid": f"{label}: choose a file."}
    return {}


def _number_messages(label: str, field: forms.IntegerField | forms.FloatField) -> dict[str, str]:
    """A number field's bounds, named: "Steps: 10 to 250.", "Seed: at least 0.", "Guidance: a number."."""
    lo, hi = field.min_value, field.max_value
    whole = "a number" if isinstance(field, forms.FloatField) else "a whole number"  # Float is an Integer
    if lo is not None and hi is not None:
        span_ = f"{_num(lo)} to {_num(hi)}"
        return {
            "min_value": f"{label}: {span_}.",
            "max_value": f"{label}: {span_}.",
            "invalid": f"{label}: {whole} from {span_}.",
        }
    if lo is not None:
        return {
            "min_value": f"{label}: at least {_num(lo)}.",
            "invalid": f"{label}: {whole}, at least {_num(lo)}.",
        }
    return {"invalid": f"{label}: {whole}."}


def explain_fields(form: forms.Form) -> None:
    """Replace every Django generic message still on the form's fields with one naming the allowed values."""
    for name, field in form.fields.items():
        defaults = _defaults(field)
        for code, text in _generic_messages(name, field).items():
            current = field.error_messages.get(code)
            if current is None or current is defaults.get(code) or current == defaults.get(code):
                field.error_messages[code] = text
