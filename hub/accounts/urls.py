from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import path
from django.utils.decorators import method_decorator

from hub.accounts import views, views_audit, views_invite
from hub.accounts.views_invite import InvalidIs400, PasswordChangeView


@method_decorator(login_not_required, name="dispatch")
class LoginView(InvalidIs400, auth_views.LoginView):
    pass


urlpatterns = [
    path("login/", LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", PasswordChangeView.as_view(), name="password_change"),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("password/reset/", views_invite.PasswordResetView.as_view(), name="password_reset"),
    path("password/reset/sent/", views_invite.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path(
        "password/reset/<uidb64>/<token>/",
        views_invite.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "password/reset/done/",
        views_invite.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("settings/", views_invite.personal_settings, name="accounts-settings"),
    path("invite/<str:token>/", views_invite.invitation_accept_view, name="accounts-invitation-accept"),
    path("people/", views.people, name="people"),
    path("people/add/", views.person_add, name="people-add"),
    path("people/<int:user_id>/role/", views.person_role, name="people-role"),
    path("people/<int:user_id>/active/", views.person_active, name="people-active"),
    path("people/<int:user_id>/password/", views.person_password, name="people-password"),
    path("people/<int:user_id>/unlock/", views.person_unlock, name="people-unlock"),
    path("people/invitations/new/", views.invitation_add, name="people-invite"),
    path(
        "people/invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke_view,
        name="people-invite-revoke",
    ),
    path("audit/", views_audit.audit_log, name="accounts-audit"),
    path("tokens/", views.tokens, name="accounts-tokens"),
    path("tokens/new/", views.token_add, name="accounts-tokens-add"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="accounts-tokens-revoke"),
]
