"""The Celery app. Celery carries only short tasks; the job queue itself lives in the database.

Two health signals are written to Redis for ``/healthz``:
- each worker records a heartbeat every few seconds (a bootstep on the worker's timer), and
- beat records its last tick (a scheduler subclass), so a stopped beat shows up even while workers run.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from celery import Celery, bootsteps, signals
from celery.beat import PersistentScheduler
from celery.schedules import crontab

from hub.disk import data_folder_problem
from hub.env import env_clock, env_float, env_list
from hub.logfilters import mask_every_handler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")


def close_redis_channels_despite_a_dead_brpop() -> None:
    """Let kombu's Redis channel finish closing when the BRPOP it has in flight fails (kombu 5.7.0).

    ``Channel.close`` first reads the reply of its pending BRPOP; with Redis gone that read raises a connection
    error, which ends the close there, before the channel's unacknowledged messages are restored. Celery 5.7,
    on a lost broker, calls ``connection.collect()`` (that close fails and is ignored; the connection lets go
    of its transport) and then ``connection.close()``, which closes the channel again: now the restore needs a
    new Redis client, whose settings come from the released transport (None), and the worker stops with
    "Unrecoverable error: AttributeError: 'NoneType' object has no attribute 'hostname'". It happens when the
    loss is noticed on another socket first (the remote-control pub/sub) while the task channel waits in BRPOP
    holding messages: 2 of 3 runs of jobs/tests/queue/test_broker_down.py before this.

    The read is only a drain (a dead socket has nothing left to give), so a connection error there no longer
    stops the rest of the close: the restore runs during ``collect()``, while the transport is still there, as
    it does when the BRPOP socket is the one that notices the loss first. Applied once, in every process.
    """
    from queue import Empty

    from kombu.transport import redis as kombu_redis

    close = kombu_redis.Channel.close
    if getattr(close, "hub_drains_first", False):
        return

    def close_draining_first(self):
        if self._in_poll:
            try:
                self._brpop_read()  # resets _in_poll whatever happens, so ``close`` doesn't read again
            except (Empty, *self.connection_errors):
                pass
        close(self)

    close_draining_first.hub_drains_first = True
    kombu_redis.Channel.close = close_draining_first


close_redis_channels_despite_a_dead_brpop()

app = Celery("hub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# -- queues: a worker beside each device ------------------------------------------------------------------------
# Tasks that talk to a device (a job's dispatch, run, polls, recovery and stop; the device status poll) go to that
# device's own queue, ``device.<pk>``; every other task to Celery's default queue. Every worker consumes the
# default queue. A worker started with ``HUB_WORKER_DEVICES=name,…`` consumes the queues of those devices only (it
# is the one that can reach them), with ``HUB_WORKER_DEVICES=none`` no device's; any other worker consumes every
# device's queue, following devices added while it runs (``devices.tasks``). So ``make up``'s one worker drives
# every device, as before.
DEFAULT_QUEUE = "celery"  # Celery's own default (task_default_queue)
DEVICE_QUEUE_PREFIX = "device."
WORKER_DEVICES_ENV = "HUB_WORKER_DEVICES"


def device_queue(device_id: int) -> str:
    """The Celery queue of the tasks that talk to this device."""
    return f"{DEVICE_QUEUE_PREFIX}{int(device_id)}"


NO_DEVICE = "none"  # HUB_WORKER_DEVICES=none: a worker for the default queue alone (beside a web server)


def worker_device_names() -> list[str] | None:
    """The device names this worker is limited to (``HUB_WORKER_DEVICES``); None: every device (unset or blank);
    empty: no device at all (``none``), only the tasks that touch none."""
    if not os.environ.get(WORKER_DEVICES_ENV, "").strip():
        return None
    names = env_list(WORKER_DEVICES_ENV, [])
    return [] if [n.lower() for n in names] == [NO_DEVICE] else names


def consume_queues(consumer, names) -> list[str]:
    """Have a running worker's consumer take these queues too (those it does not take yet); the ones added."""
    added = []
    for name in names:
        if not consumer.task_consumer.consuming_from(name):
            consumer.add_task_queue(name)
            added.append(name)
    return added


WORKER_HEARTBEAT_KEY = "hub:health:workers"  # sorted set: hostname -> unix time of last heartbeat
BEAT_TICK_KEY = "hub:health:beat"
HEARTBEAT_EVERY_S = 5.0

# (Read with the settings' own helper: the beat schedule is built before Django's settings load.)
RECONCILE_S = env_float("JOBS_RECONCILE_S", 5.0, minimum=0.01)
NOTIFY_SWEEP_S = env_float("NOTIFY_SWEEP_S", 60.0, minimum=0.01)
BACKUP_HOUR, BACKUP_MINUTE = env_clock("HUB_BACKUP_AT", "13:30")

# Periodic tasks, declared in code. Other apps add their own entries here (one place to read them all).
app.conf.beat_schedule = {
    "hub-beat-alive": {"task": "hub.tasks.beat_alive", "schedule": 30.0},
    # The audit log keeps HUB_AUDIT_DAYS: older entries go once a day.
    "hub-audit-prune": {"task": "hub.tasks.audit_prune", "schedule": 86400.0, "options": {"expires": 3600.0}},
    # Devices: fan out metric polls (each device every 2 s while watched or busy, else 30 s); an expired
    # tick is dropped rather than run late, so a busy worker never works through a backlog of them.
    "devices-poll-all": {"task": "devices.tasks.poll_all", "schedule": 2.0, "options": {"expires": 2.0}},
    "devices-prune-metrics": {"task": "devices.tasks.prune_metrics", "schedule": 3600.0},
    # Jobs: the safety net after any crash (dead poll chains, lapsed leases, idle queues). Countdown polls live in
    # a worker's memory, so after a worker restart this is what resumes them; cheap, hence often.
    # Notifications: a job's news whose hand-over was lost (its process killed after the commit), deliveries whose
    # task was lost (Redis away when it was enqueued, a worker killed mid-send).
    "notify-sweep": {
        "task": "notify.tasks.sweep",
        "schedule": NOTIFY_SWEEP_S,
        "options": {"expires": NOTIFY_SWEEP_S},
    },
    # Thumbnails whose task was lost with the broker at a job's end (made off the lease, so nothing else notices).
    "jobs-thumbnails-sweep": {
        "task": "jobs.tasks.sweep_thumbnails",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    },
    # Retention rules: the results announced a week ago go to the trash, what the rules take next is announced
    # (04:00 household time, before the trash is emptied).
    "jobs-apply-retention": {
        "task": "jobs.tasks.apply_retention",
        "schedule": crontab(hour=4, minute=0),
        "options": {"expires": 3600.0},
    },
    # The trash: what went in HUB_TRASH_DAYS ago is removed for good, daily (at 04:15 household time, after the
    # night's renders and before the backup).
    "jobs-empty-trash": {
        "task": "jobs.tasks.empty_trash",
        "schedule": crontab(hour=4, minute=15),
        "options": {"expires": 3600.0},
    },
    "jobs-reconcile": {
        "task": "jobs.tasks.reconcile",
        "schedule": RECONCILE_S,
        "options": {"expires": RECONCILE_S},
    },
    # Backups: once a day at HUB_BACKUP_AT (household time; afternoon by default, outside the night window when
    # tonight's renders run). Does nothing while HUB_BACKUP_DIR is unset. A missed day is not run late.
    "backups-daily": {
        "task": "backups.tasks.daily",
        "schedule": crontab(hour=BACKUP_HOUR, minute=BACKUP_MINUTE),
        "options": {"expires": 3600.0},
    },
}
app.conf.beat_scheduler = "hub.celery:HubScheduler"


def _redis():
    import redis
    from django.conf import settings

    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=2)


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Write ``hostname -> now`` into a Redis sorted set every few seconds while the worker lives."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        self.tref = None
        self.hostname = worker.hostname or socket.gethostname()

    def start(self, worker):
        self._beat()
        self.tref = worker.timer.call_repeatedly(HEARTBEAT_EVERY_S, self._beat, priority=10)

    def stop(self, worker):
        if self.tref is not None:
            self.tref.cancel()
        try:
            _redis().zrem(WORKER_HEARTBEAT_KEY, self.hostname)
        except Exception:  # noqa: BLE001 - shutting down; Redis may already be gone
            pass

    def _beat(self):
        try:
            _redis().zadd(WORKER_HEARTBEAT_KEY, {self.hostname: time.time()})
        except Exception:  # noqa: BLE001 - Redis down: /healthz reports it; the worker keeps going
            pass


app.steps["worker"].add(WorkerHeartbeat)


class HubScheduler(PersistentScheduler):
    """The default scheduler, plus a throttled "beat is alive" timestamp in Redis."""

    _last_mark = 0.0

    def tick(self, *args, **kwargs):
        now = time.time()
        if now - self._last_mark >= HEARTBEAT_EVERY_S:
            try:
                _redis().set(BEAT_TICK_KEY, now, ex=3600)
                self._last_mark = now
            except Exception:  # noqa: BLE001 - Redis down: beat itself will complain loudly
                pass
        # Wake at least every few seconds so the mark stays fresh between long-interval entries.
        return min(super().tick(*args, **kwargs), HEARTBEAT_EVERY_S)

    def setup_schedule(self):
        refuse_an_unusable_data_folder()  # before the schedule file is opened in it (beat_init comes later)
        super().setup_schedule()


@signals.worker_init.connect
def refuse_an_unusable_data_folder(**kwargs) -> None:
    """The worker (``worker_init``) and beat (``HubScheduler``) stop at start-up, with one line naming it, on a data folder they cannot write: Celery
    runs Django's system checks (``hub.checks``) without stopping on an error."""
    if problem := data_folder_problem():
        err = sys.__stderr__ or sys.stderr  # Celery redirects sys.stderr to its log once it is set up
        err.write(f"tiiny-hub: {problem}\n")
        err.flush()
        os._exit(1)  # before any pool, consumer or schedule file exists: nothing to clean up


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def mask_tokens_in_celerys_handlers(logger, **kwargs) -> None:
    """Celery replaces the root logger's handlers with its own (worker_hijack_root_logger), dropping the token mask
    hub.settings gave Django's: the worker and beat log through these, and a task's error may carry a link."""
    mask_every_handler(logger)
