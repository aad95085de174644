from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import path
from django.utils.decorators import method_decorator

from hub.accounts import views

LoginView = method_decorator(login_not_required, name="dispatch")(auth_views.LoginView)

urlpatterns = [
    path("login/", LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("people/", views.people, name="people"),
    path("people/add/", views.person_add, name="people-add"),
    path("people/<int:user_id>/role/", views.person_role, name="people-role"),
    path("people/<int:user_id>/active/", views.person_active, name="people-active"),
    path("tokens/", views.tokens, name="accounts-tokens"),
    path("tokens/new/", views.token_add, name="accounts-tokens-add"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="accounts-tokens-revoke"),
]
