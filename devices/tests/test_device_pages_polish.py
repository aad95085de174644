"""Device pages (issue 11, "Device pages"): "Loaded" agrees with the device, readable TensorSharp names,
the default device first, a connection test that reads once, and the NPU budget for admins only."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from devices.capabilities import Capabilities, ModelCap, TensorSharpCap
from devices.models import Device
from devices.selectors import device_list_for, device_model_rows, model_label
from devices.services import device_register
from jobs.tests.ui_fixtures import MESH, VIDEO

pytestmark = pytest.mark.django_db


def _loaded_cells(html: str) -> dict[str, str]:
    """{model title: text of its Loaded cell} from the capability table."""
    rows = re.findall(
        r'<tr id="cap-\d+"><td title="([^"]+)">.*?</td>(?:<td>.*?</td>){2}<td>(.*?)</td></tr>', html
    )
    return {title: re.sub(r"<[^>]+>", "", cell) for title, cell in rows}


def test_loaded_follows_the_latest_reading_not_the_stale_capabilities(member_client, device):
    # The snapshot says the video model is loaded; the latest reading says the 3D model runs now.
    Device.objects.filter(pk=device.pk).update(
        loaded_models=[{"model_id": MESH, "npu_usage": 30, "status": "running"}]
    )
    cells = _loaded_cells(member_client.get(f"/devices/{device.pk}/").content.decode())
    assert cells[MESH] == "yes"
    assert cells[VIDEO] == "no"


def test_a_model_being_loaded_says_so(member_client, device):
    Device.objects.filter(pk=device.pk).update(
        loaded_models=[{"model_id": VIDEO, "npu_usage": 40, "status": "loading"}]
    )
    cells = _loaded_cells(member_client.get(f"/devices/{device.pk}/").content.decode())
    assert cells[VIDEO] == "loading"


def test_nothing_loaded_means_no_everywhere(member_client, device):
    Device.objects.filter(pk=device.pk).update(loaded_models=[])
    cells = _loaded_cells(member_client.get(f"/devices/{device.pk}/").content.decode())
    assert set(cells.values()) == {"no"} and len(cells) == 5


@pytest.mark.parametrize(
    "model_id,label",
    [
        ("h3.gguf", "H3"),
        ("minimax_h3_fl2va_pruned-Q4_K.gguf", "Minimax h3 fl2va pruned (Q4_K)"),
        ("Wan2.2-TI2V-5B-Q8_0.gguf", "Wan2.2-TI2V-5B (Q8_0)"),
        ("Qwen-Image-Edit-2509-Q4_K_M.gguf", "Qwen-Image-Edit-2509 (Q4_K_M)"),
        ("/models/flux-dev-F16.safetensors", "Flux-dev (F16)"),
        ("MiniMaxAI/MiniMax-H3-Turbo", "MiniMax-H3-Turbo"),  # a Tiiny id: the name after the publisher
        ("Qwen3-8B", "Qwen3-8B"),
    ],
)
def test_model_labels_are_readable(model_id, label):
    assert model_label(model_id) == label


def _tensorsharp(name: str = "Desk PC") -> Device:
    d = device_register(name=name, kind="tensorsharp", base_url="http://127.0.0.1:9", api_key="")
    caps = Capabilities(
        kind="tensorsharp",
        models=[
            ModelCap(id="h3.gguf", name="h3.gguf", kind="video", loaded=True, status="running"),
            ModelCap(id="Wan2.2-TI2V-5B-Q8_0.gguf", name="Wan2.2-TI2V-5B-Q8_0.gguf", kind="other"),
        ],
        tensorsharp=TensorSharpCap(architecture="minimax-h3", loaded="h3.gguf"),
    )
    Device.objects.filter(pk=d.pk).update(
        state=Device.State.ONLINE,
        capabilities=caps.to_dict(),
        loaded_models=[{"model_id": "h3.gguf", "npu_usage": None, "status": "running"}],
        reading_at=timezone.now(),
    )
    d.refresh_from_db()
    return d


def test_tensorsharp_models_show_readable_names_on_the_device_page(member_client):
    d = _tensorsharp()
    html = member_client.get(f"/devices/{d.pk}/").content.decode()
    assert '<td title="h3.gguf">H3</td>' in html
    assert '<td title="Wan2.2-TI2V-5B-Q8_0.gguf">Wan2.2-TI2V-5B (Q8_0)</td>' in html
    # the card's loaded list too (it is also what the live pushes render)
    assert '<span class="model-name" title="h3.gguf">H3</span>' in html
    assert ">h3.gguf<" not in html
    rows = device_model_rows(d)
    assert [(r.name, r.loaded) for r in rows] == [("H3", "yes"), ("Wan2.2-TI2V-5B (Q8_0)", "")]


def test_the_default_device_sorts_first(member_client, device):
    _tensorsharp("A desk PC")  # sorts before "Pocket" by name
    zed = device_register(name="Zed box", kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")
    Device.objects.update(is_default=False)
    Device.objects.filter(pk=zed.pk).update(is_default=True)
    assert [d.name for d in device_list_for(None)] == ["Zed box", "A desk PC", "Pocket"]
    html = member_client.get("/devices/").content.decode()
    assert html.index("Zed box") < html.index("A desk PC") < html.index(">Pocket<")
    dashboard = member_client.get("/").content.decode()
    assert dashboard.index('aria-label="Zed box"') < dashboard.index('aria-label="A desk PC"')


def test_a_good_connection_test_reads_once(admin_client, pocket):
    # ``pocket`` is the Tiiny emulator over HTTP: a real connection test.
    html = admin_client.post(f"/devices/{pocket.pk}/test/").content.decode()
    assert "<strong>Connected.</strong>" in html
    assert "Connected: Connected." not in re.sub(r"<[^>]+>", "", html)


def test_a_failed_connection_test_still_says_failed(admin_client, device):
    # ``device`` points at 127.0.0.1:9, where nothing listens.
    text = re.sub(r"<[^>]+>", "", admin_client.post(f"/devices/{device.pk}/test/").content.decode())
    assert "Failed:" in text and "Connected" not in text


def test_the_npu_budget_is_rendered_for_admins_only(member_client, viewer_client, admin_client, device):
    from devices.live import device_topic, render_gauges

    Device.objects.filter(pk=device.pk).update(npu_units_used=40, npu_units_total=100)
    html = admin_client.get(f"/devices/{device.pk}/").content.decode()
    assert '<span class="npu-budget">NPU budget 40 / 100 units · </span>' in html
    for client in (member_client, viewer_client):  # not hidden by CSS: not in the page at all
        assert "NPU budget" not in client.get(f"/devices/{device.pk}/").content.decode()
    device.refresh_from_db()
    assert "NPU budget" not in render_gauges(device, oob=True)  # the version pushed to everyone else
    assert "NPU budget 40 / 100" in render_gauges(device, oob=True, admin=True)
    member = member_client.get("/").wsgi_request.user
    assert "NPU budget" not in " ".join(device_topic(member, str(device.pk))[1])  # a member's snapshot
