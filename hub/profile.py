"""How many processes the hub runs, chosen once from the machine: ``small`` for a box with little memory, else
``standard``. ``scripts/up.py`` starts what :meth:`Profile.commands` gives, and so does bench/bench_footprint.py.

``HUB_PROFILE=small|standard`` chooses; ``auto`` (the default) is ``small`` when this machine (or the container's
memory limit) has at most ``SMALL_MEMORY_MB``.

- ``standard``: the web server with one process per CPU (2 to 4, hub/webserver.py), the Celery worker with a
  prefork pool of 2, and beat as a process of its own.
- ``small``: one web process (still async: websockets and pages are served together, only page rendering
  queues behind itself); the worker's prefork pool of 1, with beat inside the worker (``celery worker -B``),
  so one Python process and one keepalive fewer. Prefork is kept, not threads or solo, because only prefork
  enforces the tasks' time limits (CELERY_TASK_SOFT_TIME_LIMIT / CELERY_TASK_TIME_LIMIT in hub/settings.py):
  a stuck device call is cut off instead of holding the worker forever. The hub's tasks are short (they take
  ids, read the device and save), so one at a time keeps up with a household's queue (bench/bench_night.py).

``HUB_WEB_WORKERS`` still sets the web processes in either profile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hub import webserver
from hub.env import env_choice, env_int

SMALL_MEMORY_MB = 2560  # a "2 GB" board reports ~1.8-2 GB; a 4 GB one ~3.7 GB
PROFILES = ("small", "standard")
# The pictures a profile decodes (jobs.files.decoding): the most megapixels one may have, and how many one process
# decodes at once. A decode costs about 4 bytes a pixel at its peak. Small: 16 MP takes a phone's 12.2 MP photo
# (4032×3024) and a 4K frame (8.3 MP), one at a time: ~64 MB. Standard: 40 MP, two at a time: ~320 MB.
IMAGE_MAX_MP = {"small": 16, "standard": 40}
IMAGE_DECODES = {"small": 1, "standard": 2}


def memory_mb() -> int | None:
    """This machine's memory, or the container's limit when lower (cgroup v2 ``memory.max``, v1 limit)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            value = Path(limit).read_text().strip()
        except OSError:
            continue
        if value.isdigit():
            total = min(total, int(value))
    return total // (1024 * 1024)


@dataclass(frozen=True)
class Profile:
    name: str
    why: str  # for the banner and up.log: "HUB_PROFILE=small" or "1.9 GB of memory"
    web_workers: int
    pool: int  # the Celery worker's prefork processes
    beat_in_worker: bool

    @property
    def image_max_mp(self) -> int:
        """``HUB_IMAGE_MAX_MP``'s default: the most megapixels a picture may have."""
        return IMAGE_MAX_MP[self.name]

    @property
    def image_decodes(self) -> int:
        """``HUB_IMAGE_DECODES``'s default: pictures one process decodes at once."""
        return IMAGE_DECODES[self.name]

    def describe(self) -> str:
        beat = "beat inside the worker" if self.beat_in_worker else "beat apart"
        return (
            f"profile {self.name} ({self.why}): {self.web_workers} web process(es), worker pool of {self.pool}, "
            f"{beat}"
        )

    def commands(
        self, *, host: str, port: int, data_dir: Path, python: str, wrap: list[str]
    ) -> dict[str, list[str]]:
        """Each service's argv (web, worker, and beat unless it runs inside the worker), each behind ``wrap``
        (keepalive)."""
        celery = [*wrap, python, "-m", "celery", "-A", "hub"]
        schedule = f"--schedule={data_dir / 'celerybeat-schedule'}"
        worker = self.worker_command(python=python, wrap=wrap)
        out = {"web": [*wrap, *webserver.command(host, port, n_workers=self.web_workers, python=python)]}
        if self.beat_in_worker:  # this module runs the worker, with beat as a thread (worker_with_beat)
            out["worker"] = [
                *wrap,
                python,
                "-m",
                "hub.profile",
                *worker[len(celery) :],
                f"--beat-{schedule[2:]}",
            ]
        else:
            out["worker"] = worker
            out["beat"] = [*celery, "beat", "--loglevel=INFO", schedule]
        return out

    def worker_command(self, *, python: str, wrap: list[str]) -> list[str]:
        """The Celery worker's argv behind ``wrap``: ``make up``'s, and ``make worker``'s alone on a machine beside
        its devices (scripts/worker.py; beat runs beside the web server). Which queues it consumes, every device's
        or those of ``HUB_WORKER_DEVICES``, it chooses at its start (``devices.tasks``)."""
        return [*wrap, python, "-m", "celery", "-A", "hub", "worker", "--loglevel=INFO",
                f"--concurrency={self.pool}", "--without-gossip", "--without-mingle"]  # fmt: skip


def choose(name: str | None = None) -> Profile:
    """The profile named (or ``HUB_PROFILE``), ``auto`` going by this machine's memory."""
    name = name or env_choice("HUB_PROFILE", "auto", ("auto", *PROFILES))
    why = f"HUB_PROFILE={name}"
    if name == "auto":
        mb = memory_mb()
        name = "small" if mb is not None and mb <= SMALL_MEMORY_MB else "standard"
        why = f"{mb / 1024:.1f} GB of memory" if mb is not None else "memory unknown"
    if name == "small":
        return Profile("small", why, env_int("HUB_WEB_WORKERS", 1, minimum=1, maximum=64), 1, True)
    return Profile("standard", why, webserver.workers(), 2, False)


def worker_with_beat(argv: list[str]) -> None:
    """``python -m hub.profile worker [celery worker options] --beat-schedule=PATH``: the Celery worker, with beat
    as a thread of its main process once the worker is ready (after its pool is forked).

    ``celery worker --beat`` would run beat as one more process (a fork that soon holds its own ~45 MB): a
    thread costs next to nothing. Beat's work is to send the periodic tasks on time; the worker's main process
    only supervises its pool, so the two share it without slowing each other.
    """
    from celery import beat, signals

    from hub.celery import app  # reason: the Celery app (and Django) load only for this command

    schedule = next(
        (a.split("=", 1)[1] for a in argv if a.startswith("--beat-schedule=")), "celerybeat-schedule"
    )
    argv = [a for a in argv if not a.startswith("--beat-schedule=")]
    running: list = []

    def start(**_kwargs) -> None:
        service = beat.EmbeddedService(
            app, thread=True, schedule_filename=schedule, scheduler_cls=app.conf.beat_scheduler
        )
        service.start()
        running.append(service)

    def stop(**_kwargs) -> None:
        for service in running:
            service.stop()

    signals.worker_ready.connect(start, weak=False)
    signals.worker_shutdown.connect(stop, weak=False)
    app.worker_main(argv)


if __name__ == "__main__":
    import sys

    worker_with_beat(sys.argv[1:])
