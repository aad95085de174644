from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from hub import views
from hub.api import api
from jobs.v1 import v1

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("live-wire/", views.live_wire, name="hub-live-wire"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("hub.accounts.urls")),
    path("devices/", include("devices.urls")),
    path("jobs/", include("jobs.urls")),
    path("api/", api.urls),
    path("v1/", v1.urls),
    path("admin/", admin.site.urls),
]

handler403 = "hub.errors.forbidden"
handler404 = "hub.errors.not_found"
handler500 = "hub.errors.server_error"
