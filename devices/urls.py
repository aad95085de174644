from __future__ import annotations

from django.urls import path

from devices import views

urlpatterns = [
    path("", views.device_list, name="devices-list"),
    path("add/", views.device_add, name="devices-add"),
    path("add/test/", views.device_add_test, name="devices-add-test"),
    path("find/", views.device_find, name="devices-find"),
    path("<int:device_id>/", views.device_detail, name="devices-detail"),
    path("<int:device_id>/metrics.json", views.device_metrics, name="devices-metrics"),
    path("<int:device_id>/edit/", views.device_edit, name="devices-edit"),
    path("<int:device_id>/test/", views.device_test, name="devices-test"),
]
