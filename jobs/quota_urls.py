"""The Usage page, deleting results, and the admins' limit forms (``jobs.doors.quota_views``), under /usage/."""

from __future__ import annotations

from django.urls import path

from jobs.doors import quota_views

urlpatterns = [
    path("", quota_views.usage, name="usage"),
    path("results/<int:job_id>/delete/", quota_views.results_delete, name="usage-results-delete"),
    path("limits/", quota_views.quota_defaults, name="quota-defaults"),
    path("limits/<int:user_id>/", quota_views.quota_person, name="quota-person"),
]
