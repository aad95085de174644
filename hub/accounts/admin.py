from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from hub.accounts.invitations import invitation_revoke
from hub.accounts.models import ApiToken, AuditEntry, Invitation, User
from hub.accounts.services import user_access_changed
from hub.accounts.tokens import token_revoke


@admin.register(User)
class HubUserAdmin(UserAdmin):
    list_display = ("username", "display_name", "role", "is_active", "last_login")
    list_filter = ("role", "is_active", "must_change_password")
    fieldsets = (
        (None, {"fields": ("role", "display_name", "time_zone", "must_change_password")}),
        *UserAdmin.fieldsets,
    )

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change:  # their open sockets re-check at once, as after the People page (hub.consumers)
            user_access_changed(user_id=obj.pk, closed=not obj.is_active)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-only view with a revoke action: tokens are created where the raw value can be shown once
    (the "API tokens" page or ``manage.py create_token``), and their hash is nothing to edit."""

    list_display = (
        "name",
        "user",
        "prefix",
        "scopes",
        "created",
        "last_used_at",
        "last_used_ip",
        "revoked_at",
    )
    list_filter = ("revoked_at", "scopes")
    search_fields = ("name", "prefix", "user__username")
    list_select_related = ("user",)
    exclude = ("key_hash",)
    readonly_fields = (
        "user",
        "name",
        "prefix",
        "scopes",
        "created",
        "last_used_at",
        "last_used_ip",
        "revoked_at",
    )
    actions = ("revoke",)

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset.filter(revoked_at__isnull=True):
            token_revoke(token=token, by=request.user)
        self.message_user(request, "Revoked; they no longer work.")


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Read-only with a revoke action: invitations are created where the link can be shown once (the People
    page or ``manage.py invite``), and their hash is nothing to edit."""

    list_display = (
        "prefix",
        "role",
        "note",
        "created_by",
        "created_at",
        "expires_at",
        "used_by",
        "revoked_at",
    )
    list_filter = ("role", "revoked_at", "used_at")
    search_fields = ("prefix", "note", "created_by__username", "used_by__username")
    list_select_related = ("created_by", "used_by")
    exclude = ("token_hash",)
    readonly_fields = (
        "prefix",
        "role",
        "note",
        "created_by",
        "created_at",
        "expires_at",
        "used_at",
        "used_by",
        "revoked_at",
    )
    actions = ("revoke",)

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected invitations")
    def revoke(self, request, queryset):
        for invitation in queryset.filter(revoked_at__isnull=True, used_at__isnull=True):
            invitation_revoke(invitation=invitation, by=request.user)
        self.message_user(request, "Revoked; their links no longer work.")


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only: the audit is what happened; nobody edits or deletes it here."""

    list_display = ("at", "action", "actor_name", "ip", "target_kind", "target_name", "detail")
    list_filter = ("action",)
    search_fields = ("actor_name", "target_name")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


# django-otp's devices are not edited in the admin site (a secret and a QR code page per device): people set up
# their own on Two-factor sign-in, and `manage.py two_factor_off NAME` turns one off.
for _model in (TOTPDevice, StaticDevice):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
