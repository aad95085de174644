from __future__ import annotations

from django.urls import path

from notify import views

urlpatterns = [
    path("", views.home, name="notify-home"),
    path("household/", views.household, name="notify-household"),
    path("private-hosts/", views.private_hosts, name="notify-private-hosts"),
    path("private-hosts/<int:host_id>/delete/", views.private_host_delete, name="notify-private-host-delete"),
    path("channels/add/", views.channel_add, name="notify-channel-add"),
    path("channels/<int:channel_id>/", views.channel_edit, name="notify-channel-edit"),
    path("channels/<int:channel_id>/delete/", views.channel_delete, name="notify-channel-delete"),
    path("channels/<int:channel_id>/test/", views.channel_test, name="notify-channel-test"),
    path(
        "channels/<int:channel_id>/confirm/",
        views.channel_confirm_resend,
        name="notify-channel-confirm-resend",
    ),
    path("confirm/<str:token>/", views.confirm_address, name="notify-confirm"),
    path("jobs/<int:job_id>/deliveries/", views.job_deliveries_box, name="notify-job-deliveries"),
    path("push/key/", views.push_key, name="notify-push-key"),
    path("push/subscribe/", views.push_subscribe, name="notify-push-subscribe"),
    path("push/unsubscribe/", views.push_unsubscribe, name="notify-push-unsubscribe"),
]
