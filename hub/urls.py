from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.generic import RedirectView

from hub import api as hub_api
from hub import metrics as hub_metrics
from hub import views
from hub.accounts import oidc
from jobs.doors import views as jobs_views
from jobs.doors.v1 import v1
from notify import views as notify_views


def _token_door(urls):
    """The API's own auth answers 401 in JSON; Django's sign-in redirect must not step in first."""
    patterns, app_name, namespace = urls
    for pattern in patterns:
        login_not_required(pattern.callback)
    return patterns, app_name, namespace


urlpatterns = [
    path("", jobs_views.dashboard, name="dashboard"),  # the jobs app builds it (jobs.doors.pages)
    path("live-wire/", views.live_wire, name="hub-live-wire"),
    path("healthz", views.healthz, name="healthz"),
    path("health/", views.health_page, name="hub-health"),  # the admins' readable status page
    path("metrics", hub_metrics.metrics, name="metrics"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("manifest.webmanifest", views.manifest, name="manifest"),
    path("accounts/", include("hub.accounts.urls")),
    # OpenID Connect (hub.accounts.oidc): the redirect URI to register at the provider is <hub>/oidc/callback/.
    path("oidc/authenticate/", oidc.SignInStart.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", oidc.SignInCallback.as_view(), name="oidc_authentication_callback"),
    path("devices/", include("devices.urls")),
    path("jobs/", include("jobs.urls")),
    path("notify/", include("notify.urls")),  # notification channels and deliveries (notify/)
    path("sw.js", notify_views.service_worker, name="notify-sw"),  # at the root: its scope is the whole hub
    path("usage/", include("jobs.quota_urls")),  # quotas and usage (jobs.doors.quota_views)
    path("groups/", include("jobs.group_urls")),  # groups of people, for admins (jobs.doors.group_views)
    path("api/", _token_door(hub_api.urls())),
    path("v1/", _token_door(v1.urls)),
    # The admin site signs in through the hub's own page (its password, throttling and second factor), never its own.
    path("admin/login/", login_not_required(RedirectView.as_view(url="/accounts/login/", query_string=True))),
    path("admin/", admin.site.urls),
]

handler403 = "hub.errors.forbidden"
handler404 = "hub.errors.not_found"
handler500 = "hub.errors.server_error"
