"""Friendly error pages. They render without a database or a request context when things are bad."""

from __future__ import annotations

from django.http import HttpResponseServerError
from django.shortcuts import render
from django.template.loader import render_to_string


def forbidden(request, exception=None):
    return render(request, "errors/403.html", status=403)


def not_found(request, exception=None):
    return render(request, "errors/404.html", status=404)


def server_error(request):
    # No context processors: the failure might be the database or Redis itself.
    return HttpResponseServerError(render_to_string("errors/500.html"))
