"""Issue 34: the cache keeps JSON, never pickles. Django's Redis cache unpickled whatever it found under a key, so a
process that reached Redis could plant a pickle and have a web process or worker run it on the next read."""

from __future__ import annotations

import datetime as dt
import os
import pickle

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from devices.models import Device
from hub import metrics as hub_metrics
from jobs.models import DeviceUse


class _Planted:
    """A pickle whose loading writes a file: what an attacker's would do, but harmless."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_planted_under_a_hub_key_is_refused_not_run(tmp_path):
    marker = tmp_path / "ran"
    key = "pages:generation"  # hub.pagecache.GENERATION_KEY: read on every kept page
    # Planted as another process would: straight into Redis, under the name the hub's cache gives the key.
    planter = redis.Redis.from_url(settings.REDIS_URL)
    planter.set(cache.make_and_validate_key(key), pickle.dumps(_Planted(str(marker))))
    planter.close()
    try:
        with pytest.raises(ValueError):
            cache.get(key)
        assert not marker.exists()
    finally:
        cache.delete(key)


def test_the_hubs_kinds_of_value_come_back_as_they_went_in():
    values = {"s": "1,2,3", "f": 1712.25, "d": {"at": 1.5, "from": 3, "to": 4}, "t": True, "l": [[1, 2.5]]}
    for name, value in values.items():
        cache.set(f"json-test:{name}", value, timeout=30)
        assert cache.get(f"json-test:{name}") == value
    cache.add("json-test:n", 0, timeout=30)
    assert cache.incr("json-test:n") == 1 and cache.get("json-test:n") == 1  # counted in Redis, atomically
    cache.delete_many([*(f"json-test:{name}" for name in values), "json-test:n"])


@pytest.mark.django_db
def test_the_device_seconds_kept_for_the_metrics_keep_their_device_numbers(member):
    cutoff = hub_metrics._cutoff(timezone.now())
    key = hub_metrics.SPANS_KEY.format(cutoff)
    cache.delete(key)
    ended = cutoff - dt.timedelta(hours=2)
    device = Device.objects.create(name="Pocket", base_url="http://127.0.0.1:9")
    DeviceUse.objects.create(
        owner=member, device=device, started=ended - dt.timedelta(seconds=90), ended=ended, seconds=90.0
    )
    try:
        first = hub_metrics._spans_before(cutoff)  # summed from the database, then kept
        assert hub_metrics._spans_before(cutoff) == first == {device.pk: 90.0}  # read back from the cache
    finally:
        cache.delete(key)
