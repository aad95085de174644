from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from hub.accounts.models import User


@admin.register(User)
class HubUserAdmin(UserAdmin):
    list_display = ("username", "role", "is_active", "last_login")
    list_filter = ("role", "is_active")
    fieldsets = ((None, {"fields": ("role",)}), *UserAdmin.fieldsets)
