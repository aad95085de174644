from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import path
from django.utils.decorators import method_decorator

from hub.accounts import views


class _InvalidIs400:
    """Django's auth views answer a wrong password or a bad new password with 200; the hub answers every
    invalid form with 400 and the form, so scripts, htmx and people alike see that nothing was done."""

    def form_invalid(self, form):
        response = super().form_invalid(form)
        response.status_code = 400
        return response


@method_decorator(login_not_required, name="dispatch")
class LoginView(_InvalidIs400, auth_views.LoginView):
    pass


class PasswordChangeView(_InvalidIs400, auth_views.PasswordChangeView):
    pass


urlpatterns = [
    path("login/", LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", PasswordChangeView.as_view(), name="password_change"),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("people/", views.people, name="people"),
    path("people/add/", views.person_add, name="people-add"),
    path("people/<int:user_id>/role/", views.person_role, name="people-role"),
    path("people/<int:user_id>/active/", views.person_active, name="people-active"),
    path("tokens/", views.tokens, name="accounts-tokens"),
    path("tokens/new/", views.token_add, name="accounts-tokens-add"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="accounts-tokens-revoke"),
]
