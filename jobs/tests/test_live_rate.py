"""How much the live feed sends each open page during a busy period: messages/s and bytes/s per page.

Real processes (ASGI server, worker, beat, Redis) and the emulated Tiiny: renders run back to back while four
pages stay open, each connected with the URL its own HTML names (``ws-connect``) and a real session. The
numbers go to ``test-artifacts/live-rate.txt``; the bound below is what "quiet" means here. Set
``LIVE_RATE_REPORT_ONLY=1`` to only measure (e.g. on an older tree, for a before/after comparison).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import Counter

import httpx
import pytest
import websockets

from conftest import ARTIFACTS, PASSWORD
from hub.testing import run_async
from jobs.services import job_submit
from jobs.tests.ui_fixtures import VIDEO

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WINDOW_S = float(os.environ.get("LIVE_RATE_WINDOW_S", "20"))
MAX_MESSAGES_PER_S = 2.0  # per open page, with a render ticking and the device polled


def _session(base: str, username: str) -> tuple[str, str]:
    client = httpx.Client(base_url=base, timeout=10)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    client.post(
        "/accounts/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base}/accounts/login/"},
    )
    return client.cookies["sessionid"], client


def _ws_url(client: httpx.Client, path: str) -> str | None:
    html = client.get(path).text
    found = re.search(r'ws-connect="([^"]+)"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def test_each_open_page_gets_at_most_a_couple_of_small_messages_a_second(
    live_server_asgi, live_worker, live_beat, tiiny, pocket, member, admin_user, viewer
):
    base = live_server_asgi.extra["url"]
    tiiny.set_speed(6)  # a 2-second video renders for a while, ticking
    params = {"prompt": "a fox", "size": "832x480", "seconds": 2, "steps": 4}
    jobs = [
        job_submit(
            owner=member, device=pocket, kind="video", model_id=VIDEO, params=dict(params), shared=i % 2 == 0
        )
        for i in range(6)
    ]
    sessions = {name: _session(base, user.username) for name, user in
                [("member", member), ("admin", admin_user), ("viewer", viewer)]}  # fmt: skip
    pages = [
        ("dashboard (member)", "member", "/"),
        ("job page (member)", "member", f"/jobs/{jobs[0].pk}/"),
        ("queue (admin)", "admin", "/jobs/queue/"),
        ("device list (viewer)", "viewer", "/devices/"),
    ]
    targets = []
    for label, who, path in pages:
        cookie, client = sessions[who]
        url = _ws_url(client, path)
        if url:
            targets.append((label, cookie, base.replace("http", "ws") + url))

    async def listen(cookie: str, url: str) -> tuple[int, int, Counter]:
        count = size = 0
        ids: Counter = Counter()
        async with websockets.connect(
            url, origin=base, additional_headers={"Cookie": f"sessionid={cookie}"}
        ) as ws:
            try:  # the (re)connect snapshot is not part of the rate
                while True:
                    await asyncio.wait_for(ws.recv(), 1.0)
            except TimeoutError:
                pass
            end = time.monotonic() + WINDOW_S
            while (left := end - time.monotonic()) > 0:
                try:
                    message = await asyncio.wait_for(ws.recv(), left)
                except TimeoutError:
                    break
                count += 1
                size += len(message.encode())
                found = re.search(r'\sid="([^"]+)"', message)
                ids[re.sub(r"\d+", "N", found.group(1)) if found else "?"] += len(message.encode())
        return count, size, ids

    async def all_pages():
        return await asyncio.gather(*(listen(cookie, url) for _, cookie, url in targets))

    results = run_async(all_pages)
    lines = [f"live feed per open page over {WINDOW_S:.0f} s, renders ticking on the emulator:"]
    for (label, _, url), (count, size, ids) in zip(targets, results, strict=True):
        lines.append(
            f"  {label:24} {count / WINDOW_S:5.2f} msg/s {size / WINDOW_S / 1024:6.2f} KB/s   ({url.split('/ws/')[1]})"
        )
        lines.append("      bytes by element: " + ", ".join(f"{k} {v}" for k, v in ids.most_common(6)))
    report = "\n".join(lines)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "live-rate.txt").write_text(report + "\n")
    print(report)
    assert sum(c for c, _, _ in results) > 0, "nothing was pushed: the measurement measured nothing"
    if not os.environ.get("LIVE_RATE_REPORT_ONLY"):
        for _target, (count, _size, _ids) in zip(targets, results, strict=True):
            assert count / WINDOW_S <= MAX_MESSAGES_PER_S, report
