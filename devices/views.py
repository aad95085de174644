"""Device pages. Pages read what the poller stored; only the admin's explicit actions (test connection,
find devices) talk to the network from a request."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from devices import discovery
from devices.forms import ConnectionTestForm, DeviceForm
from devices.live import fragment_context
from devices.metrics import RANGES, chart_series
from devices.selectors import (
    device_capabilities,
    device_get_for,
    device_list_for,
    device_model_rows,
    model_label,
)
from devices.services import device_check_now, device_register, device_test_connection, device_update
from hub.accounts.decorators import admin_required


@require_GET
def device_list(request: HttpRequest) -> HttpResponse:
    devices = [fragment_context(d) for d in device_list_for(request.user)]
    return render(request, "devices/device_list.html", {"devices": devices})


@require_GET
def device_detail(request: HttpRequest, device_id: int) -> HttpResponse:
    device = device_get_for(request.user, device_id)
    caps = device_capabilities(device)
    ctx = fragment_context(
        device,
        caps=caps,
        models=device_model_rows(device, caps),  # "Loaded" from the latest reading, names readable
        videos=[{"label": model_label(v.model_id), "cap": v} for v in caps.video_models()],
        ranges=list(RANGES),
    )
    return render(request, "devices/device_detail.html", ctx)


@require_GET
def device_metrics(request: HttpRequest, device_id: int) -> JsonResponse:
    device = device_get_for(request.user, device_id)
    return JsonResponse(chart_series(device_id=device.pk, range_name=request.GET.get("range", "hour")))


@admin_required
@require_http_methods(["GET", "POST"])
def device_add(request: HttpRequest) -> HttpResponse:
    form = DeviceForm(request.POST or None, initial=request.GET.dict() if request.method == "GET" else None)
    if request.method == "POST" and form.is_valid():
        try:
            device = device_register(**form.service_fields(), by=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            report = device_check_now(device=device)
            level = messages.SUCCESS if report.ok else messages.WARNING
            messages.add_message(request, level, f"Added {device.name}. Connection test: {report.human}")
            return redirect("devices-detail", device_id=device.pk)
    status = 400 if request.method == "POST" else 200  # the form again, with what is wrong
    return render(request, "devices/device_form.html", {"form": form, "device": None}, status=status)


@admin_required
@require_http_methods(["GET", "POST"])
def device_edit(request: HttpRequest, device_id: int) -> HttpResponse:
    device = device_get_for(request.user, device_id)
    form = DeviceForm(request.POST or None, device=device)
    if request.method == "POST" and form.is_valid():
        try:
            device_update(device=device, **form.service_fields(), by=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Saved {device.name}.")
            return redirect("devices-detail", device_id=device.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "devices/device_form.html", {"form": form, "device": device}, status=status)


@admin_required
@require_POST
def device_test(request: HttpRequest, device_id: int) -> HttpResponse:
    """Test a saved device now and record the state it finds."""
    device = device_get_for(request.user, device_id)
    report = device_check_now(device=device)
    return render(request, "devices/_fragments.html#test-result", {"report": report})


@admin_required
@require_POST
def device_add_test(request: HttpRequest) -> HttpResponse:
    """Test what is typed in the add form, before saving anything."""
    form = ConnectionTestForm(request.POST)
    if not form.is_valid():
        return render(
            request, "devices/_fragments.html#test-result", {"form_errors": form.errors}, status=400
        )
    report = device_test_connection(**form.cleaned_data)
    return render(request, "devices/_fragments.html#test-result", {"report": report})


@admin_required
@require_http_methods(["GET", "POST"])
def device_find(request: HttpRequest) -> HttpResponse:
    found = discovery.discover() if request.method == "POST" else None
    return render(request, "devices/device_find.html", {"found": found})
