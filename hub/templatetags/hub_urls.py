"""``{% url %}``, its answers kept: Django's tag, same syntax and same result, a dictionary lookup after the first.

Reversing walks the resolver's candidates, fills and quotes a pattern: ~50 µs a tag here. The pages draw many, a
few per plan entry, gallery card and admin row (6-10 % of the dashboard, queue and gallery pages, measured).
What ``reverse`` answers depends on the route's name and arguments, the current app (namespaces), the URLconf and
the script prefix; all of them are the key, and the URL patterns are fixed for the life of a process
(``setting_changed`` on ``ROOT_URLCONF`` empties the store, for tests that swap them). Arguments that are not
plain ints and strings (a model instance, say) are reversed every time, as Django does.

``hub.settings`` installs this library as a builtin of the template engine, after Django's own, so its ``url``
replaces Django's in every template without a ``{% load %}``.
"""

from __future__ import annotations

import functools

from django import template
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.template import defaulttags
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils.html import conditional_escape

register = template.Library()


@functools.lru_cache(maxsize=8192)
def _kept(
    view_name: str, args: tuple, kwargs: tuple, current_app: str | None, urlconf: str | None, prefix: str
):
    """``reverse`` for one key. ``prefix`` is in the key only: reverse reads the active one itself."""
    return reverse(view_name, args=args, kwargs=dict(kwargs), current_app=current_app, urlconf=urlconf)


def _plain(values) -> bool:
    return all(type(v) in (int, str) for v in values)


def reverse_kept(
    view_name: str, args: list, kwargs: dict, current_app: str | None, urlconf, prefix: str
) -> str:
    if not (isinstance(view_name, str) and _plain(args) and _plain(kwargs.values())):
        return reverse(view_name, args=args, kwargs=kwargs, current_app=current_app)
    return _kept(view_name, tuple(args), tuple(sorted(kwargs.items())), current_app, urlconf, prefix)


#: Where a render keeps its current app, URLconf and script prefix (in its render context: read once a render).
_RENDER = object()


def _render_env(context) -> tuple:
    top = context.render_context.dicts[0]
    env = top.get(_RENDER)
    if env is None:
        try:
            current_app = context.request.current_app
        except AttributeError:
            try:
                current_app = context.request.resolver_match.namespace
            except AttributeError:
                current_app = None
        env = top[_RENDER] = (current_app, get_urlconf(), get_script_prefix())
    return env


class KeptURLNode(defaulttags.URLNode):
    def render(self, context):
        args = [arg.resolve(context) for arg in self.args]
        kwargs = {k: v.resolve(context) for k, v in self.kwargs.items()}
        view_name = self.view_name.resolve(context)
        url = ""
        try:
            url = reverse_kept(view_name, args, kwargs, *_render_env(context))
        except NoReverseMatch:
            if self.asvar is None:
                raise
        if self.asvar:
            context[self.asvar] = url
            return ""
        return conditional_escape(url) if context.autoescape else url


@register.tag
def url(parser, token):
    """Django's ``{% url %}`` (its parser, its errors), rendered through :func:`reverse_kept`."""
    node = defaulttags.url(parser, token)
    return KeptURLNode(node.view_name, node.args, node.kwargs, node.asvar)


@receiver(setting_changed)
def _urlconf_changed(*, setting: str, **kwargs) -> None:
    if setting in ("ROOT_URLCONF", "FORCE_SCRIPT_NAME"):
        _kept.cache_clear()
