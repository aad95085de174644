"""Role checks for views. Signing in is already required everywhere (LoginRequiredMiddleware)."""

from __future__ import annotations

from functools import wraps

from django.core.exceptions import PermissionDenied


def admin_required(view):
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated or not request.user.is_admin:
            raise PermissionDenied("admins only")
        return view(request, *args, **kwargs)

    return wrapper


def member_required(view):
    """Members and admins: people who may submit and keep results (viewers only watch)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated or not request.user.can_submit:
            raise PermissionDenied("members only")
        return view(request, *args, **kwargs)

    return wrapper
