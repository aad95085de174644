"""Decoding within a budget (issue 34 item 7): the peak memory of a web process while people send it the worst
picture it accepts, in each profile.

The worst accepted upload is the one that costs the most to decode for the fewest bytes: a PNG of exactly the
profile's pixel budget (``HUB_IMAGE_MAX_MP``), RGBA (4 bytes a pixel, the most Pillow decodes a PNG to), one flat
colour (it compresses to a few hundred KB at most). ``BENCH_AT_ONCE`` (6, as in the issue) such uploads are posted
together to ``/jobs/new/admission/`` (the summary under the submit form, which checks the pictures as it is
typed; no rate limit) by one signed-in person, on the real web server (``python -m hub.webserver``, one process).
The issue's own picture (a 6300×6300 PNG, 39.7 MP) is sent the same way. The process's peak resident memory
(``VmHWM`` in /proc, reset before each round through ``clear_refs``) less its resident memory just before the
round is what the round cost.

"before" is the hub as it was: 40 MP on either profile and no bound on the decodes at once
(``HUB_IMAGE_MAX_MP=40 HUB_IMAGE_DECODES=64``). Target: a round costs at most the budget's pixels × 4 bytes × the
decodes at once, plus 40 MB (the uploads' bytes, Django's request and Pillow's own buffers).
"""

from __future__ import annotations

import io
import math
import os
import re
import sys
import threading
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
AT_ONCE = int(os.environ.get("BENCH_AT_ONCE", "6"))
ALLOWANCE_MB = 40
PASSWORD = "bench-pass-1"


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def reset_peak(pid: int) -> bool:
    """Start ``VmHWM`` again from the current resident size (Linux: 5 to clear_refs); False where that is refused."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def png(side: int, mode: str = "RGBA") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, (side, side), (90, 140, 200, 255)[: len(mode)]).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def signed_in(url: str):
    import httpx

    client = httpx.Client(base_url=url, timeout=120)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = client.post(
        "/accounts/login/",
        data={"username": "bench", "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Origin": url, "Referer": f"{url}/accounts/login/"},
    )
    assert answer.status_code == 302, answer.text[:500]
    return client


def one_round(url: str, pid: int, form: dict, picture: bytes) -> dict:
    """``AT_ONCE`` admission requests with ``picture`` at once; the process's memory before and at its peak."""
    clients = [signed_in(url) for _ in range(AT_ONCE)]
    before = status_kb(pid, "VmRSS")
    exact = reset_peak(pid)
    answers: list[str] = []

    def post(client) -> None:
        headers = {"X-CSRFToken": client.cookies["csrftoken"], "HX-Request": "true", "Origin": url}
        files = {"start_image": ("photo.png", picture, "image/png")}
        answer = client.post("/jobs/new/admission/", data=form, files=files, headers=headers)
        answers.append(str(answer.status_code))

    threads = [threading.Thread(target=post, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    return {"before": before, "peak": status_kb(pid, "VmHWM"), "exact": exact, "answers": answers}


def accepted(url: str, form: dict, picture: bytes) -> bool:
    """Whether the submit form takes the picture (the admission summary shows no field's error)."""
    client = signed_in(url)
    headers = {"X-CSRFToken": client.cookies["csrftoken"], "Origin": url, "Referer": f"{url}/jobs/new/"}
    page = client.post("/jobs/new/", data={**form, "when": "asap"}, files={"start_image": ("p.png", picture)},
                       headers=headers)  # fmt: skip
    client.close()
    return "the limit is" not in page.text


def run_profile(label: str, budget_mp: int, decodes: int, form: dict) -> list[dict]:
    from hub.testing import start_asgi_server

    side = math.isqrt(budget_mp * 1_000_000)
    pictures = [
        (f"worst accepted: {side}×{side} RGBA PNG", png(side)),
        ("the issue's: 6300×6300 RGB PNG", png(6300, "RGB")),
    ]
    proc = start_asgi_server(workers=1, HUB_IMAGE_MAX_MP=str(budget_mp), HUB_IMAGE_DECODES=str(decodes))
    rows = []
    try:
        url, pid = proc.extra["url"], proc.process.pid
        for name, picture in pictures:
            took = accepted(url, form, picture)
            result = one_round(url, pid, form, picture)
            rows.append({"profile": label, "budget": budget_mp, "decodes": decodes, "picture": name,
                         "bytes": len(picture), "accepted": took, **result})  # fmt: skip
    finally:
        proc.stop()
    return rows


def main() -> None:
    from bench._hub import private_hub

    with private_hub("decode"):
        from devices.models import Device
        from devices.services import device_register
        from hub import profile
        from hub.accounts.models import User
        from jobs.tests.ui_fixtures import VIDEO, capabilities

        User.objects.create_user("bench", password=PASSWORD, role="member")
        device = device_register(name="Pocket", kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")
        Device.objects.filter(pk=device.pk).update(state=Device.State.ONLINE, capabilities=capabilities())
        form = {"device": str(device.pk), "kind": "video", "model": VIDEO, "prompt": "a fox in the snow",
                "size": "832x480", "seconds": "2", "steps": "4", "when": "asap"}  # fmt: skip
        from django.db import connection

        connection.close()
        rows = []
        for name in ("small", "standard"):
            chosen = profile.choose(name)
            rows += run_profile(name, chosen.image_max_mp, chosen.image_decodes, form)
        rows += run_profile("before (either)", 40, 64, form)
    report(rows)


def report(rows: list[dict]) -> None:
    print("## Decoding within a budget (bench_decode.py)\n")
    print(
        f"{AT_ONCE} uploads at once to `/jobs/new/admission/` on one web process (`python -m hub.webserver`), per "
        "profile: the worst picture it accepts (a flat RGBA PNG of exactly `HUB_IMAGE_MAX_MP`) and the issue's "
        "6300×6300 PNG. Cost: the process's peak resident memory (VmHWM, reset before each round) less its "
        'resident memory before. "before" is the hub as it was (40 MP, no bound on decodes at once). Target: at '
        f"most budget × 4 B × decodes at once + {ALLOWANCE_MB} MB.\n"
    )
    print(
        "| profile | budget | decodes at once | picture | file | accepted | before | peak | cost | target |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cost = (r["peak"] - r["before"]) / 1024
        bound = r["budget"] * 4 * min(r["decodes"], AT_ONCE) + ALLOWANCE_MB
        verdict = f"≤ {bound:.0f} MB " + ("meets" if cost <= bound else "**MISSES**")
        if r["profile"].startswith("before"):
            verdict = "–"
        print(
            f"| {r['profile']} | {r['budget']} MP | {r['decodes']} | {r['picture']} | {r['bytes'] / 1024:.0f} KB | "
            f"{'yes' if r['accepted'] else 'refused'} | {r['before'] / 1024:.0f} MB | {r['peak'] / 1024:.0f} MB | "
            f"{cost:.0f} MB | {verdict} |"
        )
    if not all(r["exact"] for r in rows):
        print("\nVmHWM could not be reset here: a peak may be an earlier round's.")
    statuses = sorted({a for r in rows for a in r["answers"]})
    print(
        f'\nThe uploads were answered {", ".join(statuses)} (the summary shows no field\'s error; "accepted" is '
        "whether the submit form takes the picture). The picture's size is read from its header: a refused one "
        "costs no decode."
    )


if __name__ == "__main__":
    main()
