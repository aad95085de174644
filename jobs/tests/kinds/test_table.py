"""The kinds table's lookups: every part of the hub asks the table, the table names the parts."""

from __future__ import annotations

import pytest

from devices.capabilities import Capabilities, ModelCap, reference_video_cap
from devices.models import Device
from jobs.kinds import estimates, schemas
from jobs.kinds.forms import SpeechForm, TensorSharpEditForm, TiinyVideoForm
from jobs.kinds.runners.tiiny import TiinyVideoRunner
from jobs.kinds.table import (
    SPECS,
    api_schemas,
    form_class_for,
    runner_for,
    schema_for,
    seed_seconds,
    shape_of,
    spec_for,
    style_of,
)
from jobs.models import Job

V = "MiniMaxAI/MiniMax-H3-Turbo"


def test_the_form_of_each_pair():
    assert form_class_for("tiiny", "video") is TiinyVideoForm
    assert form_class_for("tiiny", "speech") is SpeechForm
    assert form_class_for("tensorsharp", "image") is TensorSharpEditForm
    with pytest.raises(ValueError, match="cannot run music jobs"):
        form_class_for("tensorsharp", "music")


def test_the_style_of_each_pair():
    assert style_of("tiiny", "video") == "poll"
    assert style_of("tiiny", "image") == "blocking"
    assert style_of("tensorsharp", "video") == "stream"


def test_the_schema_of_each_pair_and_none_for_a_pair_nobody_runs():
    assert schema_for("tiiny", "video") is schemas.TiinyVideoFields
    assert schema_for("tensorsharp", "music") is None
    assert schema_for("toaster", "video") is None


def test_the_api_docs_list_every_pair_in_the_tables_order():
    pairs = api_schemas()
    assert [(d, k) for d, k, _ in pairs] == [(s.device_kind, str(s.kind)) for s in SPECS]
    body = schemas.submit_body_openapi(pairs)
    variants = body["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    assert [v["properties"]["kind"]["enum"] for v in variants] == [[k] for _, k, _ in pairs]
    assert variants[0]["title"] == "TiinyVideo (tiiny video)"


def test_the_estimate_of_a_pair_is_its_entrys():
    p = {"size": "832x480", "seconds": 2, "steps": 4}
    assert shape_of("tiiny", "video", V, p) == estimates.tiiny_video_shape(V, p) == "832x480:2s:4st"
    assert seed_seconds("tiiny", "video", V, p) == estimates.tiiny_video_seed(V, p)
    assert seed_seconds("tiiny", "mesh", "h", {"stages": ["shape"]}) == 420
    assert spec_for("tiiny", "video").estimate.refuse_over_s == 55 * 60


@pytest.mark.django_db
def test_the_runner_of_a_job_has_its_devices_client(member):
    caps = Capabilities(kind="tiiny", models=[ModelCap(V, "H3", "video")], video={V: reference_video_cap(V)})
    device = Device.objects.create(name="p", base_url="http://127.0.0.1:1", capabilities=caps.to_dict())
    job = Job.objects.create(owner=member, device=device, kind="video", model_id=V, params={})
    runner = runner_for(job)
    assert type(runner) is TiinyVideoRunner and runner.job is job
    assert runner.client.base_url.startswith("http://127.0.0.1:1")
