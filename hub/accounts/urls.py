from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.shortcuts import redirect
from django.urls import path
from django.utils.decorators import method_decorator

from hub.accounts import sso, two_factor, views, views_2fa, views_audit, views_invite
from hub.accounts.views_invite import InvalidIs400, PasswordChangeView


@method_decorator(login_not_required, name="dispatch")
class LoginView(InvalidIs400, auth_views.LoginView):
    """The sign-in page: the password form unless HUB_LOCAL_SIGNIN is off, and "Sign in with …" when OpenID
    Connect is configured (hub.accounts.sso)."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["local_signin"] = sso.local_signin_enabled()
        context["oidc_name"] = settings.HUB_OIDC_NAME if sso.oidc_enabled() else None
        return context

    def form_valid(self, form):
        user = form.get_user()
        if two_factor.has_second_factor(user):
            # The password was right; the session becomes theirs only with the code (views_2fa.signin_code).
            two_factor.pending_set(
                self.request, user=user, backend=user.backend, next_url=self.get_redirect_url()
            )
            return redirect("accounts-2fa-code")
        return super().form_valid(form)

    def post(self, request, *args, **kwargs):
        if not sso.local_signin_enabled():
            response = self.render_to_response(self.get_context_data(local_signin_refused=True))
            response.status_code = 403
            return response
        return super().post(request, *args, **kwargs)


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
    path("2fa/code/", views_2fa.signin_code, name="accounts-2fa-code"),
    path("2fa/", views_2fa.two_factor_page, name="accounts-2fa"),
    path("2fa/setup/", views_2fa.two_factor_setup, name="accounts-2fa-setup"),
    path("2fa/codes/", views_2fa.two_factor_codes, name="accounts-2fa-codes"),
    path("2fa/off/", views_2fa.two_factor_off, name="accounts-2fa-off"),
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
