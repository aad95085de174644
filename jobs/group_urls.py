"""The Groups page for admins (``jobs.doors.group_views``), under /groups/."""

from __future__ import annotations

from django.urls import path

from jobs.doors import group_views

urlpatterns = [
    path("", group_views.group_list, name="groups"),
    path("<int:group_id>/", group_views.group_edit, name="groups-edit"),
    path("<int:group_id>/members/", group_views.group_member, name="groups-member"),
    path("<int:group_id>/delete/", group_views.group_delete, name="groups-delete"),
]
