"""Form widgets of the hub's own."""

from __future__ import annotations

from functools import lru_cache

from django import forms
from django.utils.html import escape
from django.utils.safestring import mark_safe


@lru_cache(maxsize=16)
def _option_parts(choices: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str, str], ...]:
    """(value, ``<option value="…"``, ``>label</option>``) per choice, escaped once per choice list."""
    return tuple(
        (str(value), f'<option value="{escape(value)}"', f">{escape(label)}</option>")
        for value, label in choices
    )


def _attrs(attrs: dict) -> str:
    """`` name="…"`` pairs in the given order (Django's ``flatatt`` sorts them; its templates don't)."""
    return "".join(
        f" {key}" if value is True else f' {key}="{escape(value)}"'
        for key, value in attrs.items()
        if value is not False and value is not None
    )


class LongSelect(forms.Select):
    """A ``<select>`` of a flat list (the ~600 time zones, the gallery's filters): the same HTML as Django's
    ``Select``, without its template per option. Django renders each option through the form renderer's template engine:
    measured, the personal settings page took 17 ms to render in-process, nearly all of it the zones' options;
    the options are escaped once per process here and only the chosen one is marked per page.

    Grouped choices (optgroups) are drawn by Django's own ``Select``."""

    def render(self, name, value, attrs=None, renderer=None):
        if any(isinstance(label, (list, tuple)) for _v, label in self.choices):
            return super().render(name, value, attrs, renderer)
        choices = tuple((str(v), str(label)) for v, label in self.choices)
        chosen = self.format_value(value)
        final = {"name": name, **self.build_attrs(self.attrs, attrs)}
        options, marked = [], False
        for v, head, tail in _option_parts(choices):
            selected = v in chosen and (
                self.allow_multiple_selected or not marked
            )  # Select marks the first only
            marked = marked or selected
            options.append(f"{head} selected{tail}" if selected else f"{head}{tail}")
        return mark_safe(f"<select{_attrs(final)}>\n  " + "\n  ".join(options) + "\n</select>")
