"""Jobs: the database is the truth. A Job row holds state, the device-side id, progress and its story.

States (see ../shared/design/architecture.md):
    queued → scheduled (waiting for its window) → preparing (model load) → submitted → running → collecting → done
    plus failed, cancelled and interrupted (the render was lost on the device, or the hub lost a blocking/stream call;
    requeued once automatically).
Every transition is a compare-and-set UPDATE (``jobs.queue.services``) plus a JobEvent with a monotonic ``seq``.
"""

from __future__ import annotations

import datetime as dt
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


class JobKind(models.TextChoices):
    VIDEO = "video", "Video"
    MESH = "mesh", "3D model"
    MUSIC = "music", "Music"
    IMAGE = "image", "Image"
    SPEECH = "speech", "Speech"


class JobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    HELD = "held", "Waits for another job"
    SCHEDULED = "scheduled", "Waiting for its time"
    PREPARING = "preparing", "Loading the model"
    SUBMITTED = "submitted", "Sent to the device"
    RUNNING = "running", "Rendering"
    COLLECTING = "collecting", "Saving the result"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    INTERRUPTED = "interrupted", "Interrupted"


#: Ready to run: what dispatch picks from and the plan orders (a held job is not ready: see ``HELD_STATES``).
WAITING_STATES = (JobState.QUEUED, JobState.SCHEDULED)
#: Waiting for another job's result (``JobLink``, ``jobs.queue.chains``): never picked, planned after its parent.
HELD_STATES = (JobState.HELD,)
#: Not started yet, held or ready: what quotas count as queued and the pages list as waiting.
PENDING_STATES = HELD_STATES + WAITING_STATES
ACTIVE_STATES = (JobState.PREPARING, JobState.SUBMITTED, JobState.RUNNING, JobState.COLLECTING)
FINAL_STATES = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)
# Which states allow which action: decided here once; services enforce it, templates and hub.js read it.
CANCELLABLE_STATES = PENDING_STATES + ACTIVE_STATES
RETRYABLE_STATES = (JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED)


class When(models.TextChoices):
    ASAP = "asap", "As soon as possible"
    TONIGHT = "tonight", "Tonight (the device's night window)"
    NOT_BEFORE = "not_before", "Not before a time"


#: The furthest ahead a "not before" time may be. Admission refuses later ones at submit, and the model refuses
#: them in any other form (the admin site), so a stored date far away can never wedge the planner or a page.
MAX_NOT_BEFORE = dt.timedelta(days=30)


#: The dates a row may hand to the rest of the hub: two days inside ``datetime``'s range, so showing one in any
#: time zone (UTC-12 to UTC+14) or adding a day to it can never overflow.
EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC) + dt.timedelta(days=2)
LATEST = dt.datetime.max.replace(tzinfo=dt.UTC) - dt.timedelta(days=2)


def clamp_datetime(value: dt.datetime | None) -> dt.datetime | None:
    """``value`` moved inside ``EARLIEST``..``LATEST`` (None and ordinary dates unchanged)."""
    if value is None:
        return None
    if value.tzinfo is None:  # USE_TZ is on: only raw SQL could hand us a naive one
        value = value.replace(tzinfo=dt.UTC)
    return min(max(value, EARLIEST), LATEST)


def new_share_token() -> str:
    return secrets.token_urlsafe(24)


class Job(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs")
    # The device the job runs on, or, for a waiting job of the pool (``pinned`` off), the lane the pool planner
    # put it in for now (``jobs.queue.pool``): the device that frees first and can do it takes it.
    device = models.ForeignKey("devices.Device", on_delete=models.PROTECT, related_name="jobs")
    # On: only ``device`` may run it (the person chose that device). Off: "any capable device": any device in
    # ``pool``, the ids of the devices that admitted exactly this request at submit.
    pinned = models.BooleanField(default=True)
    pool = models.JSONField(default=list, blank=True)
    # Queued by an API token bound to devices: the ids it may run on (its pool never takes in another device:
    # ``jobs.queue.membership``). None: no such limit.
    devices_allowed = models.JSONField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=JobKind.choices)
    model_id = models.CharField(max_length=200)
    params = models.JSONField(default=dict)  # validated parameters, exactly what the runner sends
    prompt = models.TextField(blank=True, default="")  # the searchable text (prompt / caption / speech input)

    state = models.CharField(max_length=12, choices=JobState.choices, default=JobState.QUEUED)
    priority = models.IntegerField(default=0)  # admins' "run next" raises it; higher runs first
    when = models.CharField(max_length=12, choices=When.choices, default=When.ASAP)
    not_before = models.DateTimeField(null=True, blank=True)
    polite = models.BooleanField(default=True)  # by day, don't evict models the hub did not load

    remote_id = models.CharField(max_length=200, blank=True, default="")  # stored before anything can fail
    remote_data = models.JSONField(default=dict, blank=True)  # runner bookkeeping (e.g. image i of n, stage)
    progress = models.FloatField(default=0)  # 0..100
    phase = models.CharField(max_length=100, blank=True, default="")
    next_poll_at = models.DateTimeField(null=True, blank=True)  # reconcile revives dead poll chains
    # The poll chain's ticket: a poll task runs only if it holds the current ticket (CAS), so a revived chain
    # and a late redelivery of the old countdown task can never both poll.
    poll_ticket = models.PositiveIntegerField(default=0)
    # Set just before the device call that creates a render (poll style). If the worker dies between that call
    # and storing ``remote_id``, recovery looks for a render created after this instant instead of resubmitting.
    submit_started_at = models.DateTimeField(null=True, blank=True)
    retry_after = models.DateTimeField(null=True, blank=True)  # backoff (unreachable, polite wait)
    bypassed = models.PositiveSmallIntegerField(default=0)  # times a loaded-model job jumped ahead of it

    estimate_s = models.FloatField(null=True, blank=True)  # predicted render time
    predicted_start = models.DateTimeField(null=True, blank=True)
    predicted_finish = models.DateTimeField(null=True, blank=True)
    # Where the stored plan puts a waiting job (1 = runs next) and why it waits there, stored with the predicted
    # times by ``jobs.queue.eta.plan_device``: the pages draw the plan from these (``jobs.core.selectors.PagePlan``)
    # instead of ordering every waiting job again per page. NULL = not planned yet.
    plan_position = models.PositiveIntegerField(null=True, blank=True, editable=False)
    plan_reason = models.CharField(max_length=200, blank=True, default="", editable=False)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    attempts = models.PositiveIntegerField(default=0)
    requeues = models.PositiveIntegerField(default=0)  # automatic requeues after an interruption
    error_code = models.CharField(max_length=50, blank=True, default="")
    error_human = models.CharField(max_length=500, blank=True, default="")
    error_detail = models.TextField(blank=True, default="")  # the device's raw error
    device_seconds = models.FloatField(default=0)  # device time used (fair share counts it)
    evicted = models.JSONField(default=list, blank=True)  # models unloaded to make room for this job
    cancel_reason = models.CharField(max_length=300, blank=True, default="")

    shared = models.BooleanField(default=False)  # visible to the whole household
    share_token = models.CharField(max_length=64, blank=True, default="")  # read-only link; "" = revoked
    # The read-only link's options (jobs.core.share_links), reset with a new link: when it stops working (410),
    # its password (Django's password hash; "" = none) and how many times its page was opened.
    share_expires_at = models.DateTimeField(null=True, blank=True)
    share_password = models.CharField(max_length=128, blank=True, default="")
    share_opens = models.PositiveIntegerField(default=0)
    last_seq = models.PositiveIntegerField(default=0)
    # Deleted through /v1 (OpenAI's videos.delete) after it finished: kept for fair share and the record, but
    # no longer listed anywhere (``jobs_visible_to`` leaves it out).
    hidden_at = models.DateTimeField(null=True, blank=True)
    # Moved to the trash (``jobs.queue.trash``): hidden like the above (``hidden_at`` is set too), its files kept
    # until it is restored or removed for good ``HUB_TRASH_DAYS`` later. NULL = not in the trash.
    trashed_at = models.DateTimeField(null=True, blank=True, db_index=True)
    trashed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The idempotency key it was submitted with (hashed with the owner, ``jobs.queue.services.job_submit``): the same
    # form posted twice, or an API call retried, finds this job instead of queuing another. NULL = none given.
    submit_token = models.CharField(max_length=64, null=True, blank=True, unique=True, editable=False)
    # The batch it was submitted in (``jobs.queue.batches``): several jobs admitted together, all or nothing, shown
    # and cancelled as one group. "" = submitted alone.
    batch = models.CharField(max_length=32, blank=True, default="", db_index=True, editable=False)

    class Meta:
        ordering = ["-created"]
        indexes = [
            # The scheduler's waiting jobs, the dashboard's "running now" and reconcile's sweep of active jobs:
            # all are "this device, these states". (Not partial indexes: SQLite can't match a partial index's
            # condition against a query's bound parameters, so it would never use one here.)
            models.Index(fields=["device", "state", "created"], name="jobs_device_state_idx"),
            models.Index(fields=["owner", "-created"], name="jobs_owner_hist_idx"),
            models.Index(fields=["-created"], name="jobs_created_idx"),
            models.Index(fields=["owner", "finished_at"], name="jobs_fairshare_idx"),
            models.Index(fields=["share_token"], name="jobs_share_idx"),
            # History pages filtered by device and state ("failed jobs on the Tiiny").
            models.Index(fields=["device", "-created"], name="jobs_device_hist_idx"),
            # Fair share: device-seconds per owner on one device over the last 7 days.
            models.Index(fields=["device", "finished_at"], name="jobs_device_fair_idx"),
            # /metrics: jobs by state and kind, a GROUP BY the index answers alone (85 -> 24 ms at 100k rows).
            models.Index(fields=["state", "kind"], name="jobs_state_kind_idx"),
            # Fair share over the pool: device-seconds per owner on every device over the last 7 days.
            models.Index(fields=["finished_at"], name="jobs_finished_idx"),
            # A person's trash (``jobs.queue.trash``): the Trash page, its count and its size. Without it each read
            # walked every job of theirs (the owner's index) to find the few trashed: 15-20 ms each at 100k jobs.
            models.Index(fields=["owner", "trashed_at"], name="jobs_owner_trash_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk}"

    @classmethod
    def from_db(cls, db, field_names, values):
        """Every date of a row comes clamped (``clamp_datetime``): one written past ``MAX_NOT_BEFORE`` by raw SQL
        can't overflow a page, a fragment or the planner (e.g. 9999-12-31 UTC shown east of UTC)."""
        values = [clamp_datetime(v) if isinstance(v, dt.datetime) else v for v in values]
        return super().from_db(db, field_names, values)

    def clean(self) -> None:
        from django.core.exceptions import ValidationError
        from django.utils import timezone

        if self.not_before and self.not_before > timezone.now() + MAX_NOT_BEFORE:
            raise ValidationError(
                {"not_before": f"Choose a time within the next {MAX_NOT_BEFORE.days} days."}
            )

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def is_waiting(self) -> bool:
        """Not started yet: ready (queued, scheduled) or held for another job's result."""
        return self.state in PENDING_STATES

    @property
    def is_held(self) -> bool:
        return self.state in HELD_STATES

    @property
    def can_cancel(self) -> bool:
        return self.state in CANCELLABLE_STATES

    @property
    def can_retry(self) -> bool:
        return self.state in RETRYABLE_STATES


class JobLink(models.Model):
    """One file input of ``child`` taken from ``parent``'s result (``jobs.core.links.ResultRef``): the child is
    held (``JobState.HELD``) until the parent's result is stored, then released in the same transaction with the
    result copied in as its input (``jobs.queue.chains``). ``released_at`` set = the input is there."""

    child = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="parent_links")
    # A parent deleted outright leaves its number (``parent_number``) so the child's story can name it; its
    # waiting children are cancelled (``jobs.core.links.cancel_children``; reconcile catches any left).
    parent = models.ForeignKey(Job, null=True, on_delete=models.SET_NULL, related_name="child_links")
    parent_number = models.PositiveBigIntegerField()
    field = models.CharField(max_length=20)  # start_image, end_image, image, ref_audio
    artifact = models.CharField(
        max_length=200, blank=True, default=""
    )  # the name asked for; "" = first that fits
    used = models.CharField(max_length=200, blank=True, default="")  # the parent's artifact it was given
    released_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["child", "field"]
        constraints = [models.UniqueConstraint(fields=["child", "field"], name="jobs_link_field_uniq")]
        # Release and the cascade: "the children of this parent still waiting".
        indexes = [models.Index(fields=["parent", "released_at"], name="jobs_link_parent_idx")]

    def __str__(self) -> str:
        return f"#{self.child_id}.{self.field} ← #{self.parent_number}"


class JobEvent(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=12, choices=JobState.choices)
    message = models.CharField(max_length=500)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["job", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="jobs_event_seq_uniq")]

    def __str__(self) -> str:
        return f"#{self.job_id}.{self.seq} {self.state}: {self.message}"


class Notice(models.Model):
    """Something a committed change must tell people, kept until what tells of it is prepared (``jobs.core.notices``).

    Written in the change's own transaction (a job entering a state someone follows, a result waiting for disk
    space) and deleted once notify has made its deliveries, which are keyed on ``(job, seq)``. A process killed
    between the commit and that leaves the row, and notify's sweep prepares it: nothing is lost, nothing is told
    twice."""

    class Kind(models.TextChoices):
        ENTERED = "entered", "Entered a state"
        DISK_FULL = "disk_full", "Waits for disk space"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    seq = models.PositiveIntegerField()  # the job's event this tells of (its ``last_seq`` then)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    state = models.CharField(max_length=12, blank=True, default="")  # the state entered (``entered``)
    created = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "seq", "kind"], name="jobs_notice_once")]

    def __str__(self) -> str:
        return f"#{self.job_id}.{self.seq} {self.kind} {self.state}"


class Artifact(models.Model):
    class Kind(models.TextChoices):
        VIDEO = "video", "Video"
        AUDIO = "audio", "Audio"
        MESH = "mesh", "3D model"
        IMAGE = "image", "Image"
        SIDECAR = "sidecar", "Sidecar"  # e.g. MiniMax-H3's WAV track beside the MP4
        THUMB = "thumb", "Thumbnail"  # the gallery's picture of the result (``jobs.files.thumbnails``)

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    file = models.FileField(max_length=300)  # relative to MEDIA_ROOT: results/<owner>/<job>/<name>
    name = models.CharField(max_length=200)
    mime = models.CharField(max_length=100)
    bytes = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job", "id"]

    def __str__(self) -> str:
        return self.name


class DeviceLease(models.Model):
    """One job at a time per device, model loads included. Expires, so a crashed worker can't keep it.

    Taken and renewed with conditional UPDATEs (``jobs.core.lease``); the row exists once per device.
    """

    device = models.OneToOneField(
        "devices.Device", on_delete=models.CASCADE, primary_key=True, related_name="lease"
    )
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    token = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"lease on device {self.device_id}: job {self.job_id}"


class LostRender(models.Model):
    """A render the hub gave up on while its device was away (``jobs.queue.pool``: its job went to another
    device). Should the device come back still rendering it, it is stopped there before the device runs anything
    else (``jobs.queue.engine.stop_lost_renders``): a job never renders on two devices at once."""

    device = models.ForeignKey("devices.Device", on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    remote_id = models.CharField(max_length=200)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"lost render {self.remote_id} of job {self.job_id} on device {self.device_id}"


class RenderStat(models.Model):
    """What renders of one shape really took on one device: the ETA model learns from finished jobs."""

    device = models.ForeignKey("devices.Device", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=JobKind.choices)
    model_id = models.CharField(max_length=200)
    shape = models.CharField(max_length=100)  # e.g. "832x480:2s:4steps"
    samples = models.PositiveIntegerField(default=0)
    mean_s = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["device", "kind", "model_id", "shape"], name="jobs_renderstat_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model_id} {self.shape}: {self.mean_s:.0f} s ({self.samples})"


class Bookmark(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="bookmarks")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="bookmarks")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "job"], name="jobs_bookmark_uniq")]

    def __str__(self) -> str:
        return f"{self.user_id} ★ {self.job_id}"


class Preset(models.Model):
    """Named settings for one kind: a person's own (``owner``) or the household's (``owner`` NULL, made and changed
    by admins only). ``values`` holds the kind's form fields without files (and without the prompt unless the
    person chose to keep it), validated at save and again at use (``jobs.queue.presets``). A person's own preset
    of a name wins over the household's of the same name."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="presets"
    )
    kind = models.CharField(max_length=10, choices=JobKind.choices)
    name = models.CharField(max_length=80)
    values = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "kind", "name"], name="jobs_preset_owner_uniq"),
            # NULL owners are distinct to SQL's UNIQUE: the household's names need their own constraint.
            models.UniqueConstraint(
                fields=["kind", "name"],
                condition=models.Q(owner__isnull=True),
                name="jobs_preset_household_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def household(self) -> bool:
        return self.owner_id is None


# -- albums (``jobs.core.albums`` decides who sees what; ``jobs.queue.albums`` changes them) -----------------------
class Album(models.Model):
    """A person's collection of finished results, shared with the members they invite (``AlbumMember``)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="albums")
    name = models.CharField(max_length=80)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    # The owner's last visit ("new since your last visit"; a member's is on their ``AlbumMember``).
    owner_visit_at = models.DateTimeField(null=True, blank=True)
    # The read-only link to the album (its owner's choice; "" = none or revoked) and its options, as a job's
    # (``jobs.core.share_links``): when it stops working (410), its password hash ("" = none), its opens.
    share_token = models.CharField(max_length=64, blank=True, default="")
    share_expires_at = models.DateTimeField(null=True, blank=True)
    share_password = models.CharField(max_length=128, blank=True, default="")
    share_opens = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-updated", "-id"]
        indexes = [models.Index(fields=["share_token"], name="jobs_album_share_idx")]

    def __str__(self) -> str:
        return self.name


class AlbumItem(models.Model):
    """One job in an album. An item whose ``added_by`` is the job's owner lets the album's viewers see the job
    even while it is private (``jobs.core.albums``): its owner chose to show it there. One added by someone else
    (a household-shared job) is seen only while the job stays shared."""

    album = models.ForeignKey(Album, on_delete=models.CASCADE, related_name="items")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="album_items")
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="album_additions"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["album", "job"], name="jobs_album_item_uniq")]
        indexes = [
            # The album page, newest or oldest first.
            models.Index(fields=["album", "added_at"], name="jobs_album_items_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.album_id} ∋ {self.job_id}"


class AlbumMember(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        CONTRIBUTOR = "contributor", "Contributor"

    album = models.ForeignKey(Album, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="album_memberships"
    )
    role = models.CharField(max_length=12, choices=Role.choices, default=Role.VIEWER)
    added_at = models.DateTimeField(auto_now_add=True)
    # The last time they opened the album: items added after it are "new since your last visit".
    last_visit_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["album", "user"], name="jobs_album_member_uniq")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.album_id} ({self.role})"


# -- quotas and fair use (``jobs.quotas.services``) ------------------------------------------------------------------------
#: A person's override that means "no limit for them", whatever the household default says.
UNLIMITED = -1
QUOTA_FIELDS = ("device_minutes_per_day", "device_minutes_per_week", "max_queued", "storage_mb")


class HouseholdQuota(models.Model):
    """The household's default limits, one row (pk 1). NULL = no limit."""

    device_minutes_per_day = models.PositiveIntegerField(null=True, blank=True)
    device_minutes_per_week = models.PositiveIntegerField(null=True, blank=True)
    max_queued = models.PositiveIntegerField(null=True, blank=True)  # jobs waiting or running at once
    storage_mb = models.PositiveIntegerField(null=True, blank=True)  # results kept (Artifact bytes)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return "household limits"


class PersonQuota(models.Model):
    """One person's overrides. NULL = the household default; ``UNLIMITED`` (-1) = no limit for them."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="quota"
    )
    device_minutes_per_day = models.IntegerField(null=True, blank=True)
    device_minutes_per_week = models.IntegerField(null=True, blank=True)
    max_queued = models.IntegerField(null=True, blank=True)
    storage_mb = models.IntegerField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(**{f"{name}__gte": UNLIMITED}), name=f"jobs_quota_{name}"
            )
            for name in QUOTA_FIELDS
        ]

    def __str__(self) -> str:
        return f"limits of {self.user_id}"


class DeviceUse(models.Model):
    """One span a job held a device, as the hub measured it: from the claim (model load included) to the
    release of the lease (render, download and clean-up done). Written once per span by the engine
    (``jobs.queue.dispatch.end_job``); a job that is re-queued, interrupted or retried has one row per run. Quotas and
    the Usage page add these up; the row outlives the job (deleting a job does not give its time back)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="device_uses")
    device = models.ForeignKey("devices.Device", on_delete=models.CASCADE, related_name="+")
    started = models.DateTimeField()
    ended = models.DateTimeField()
    seconds = models.FloatField()

    class Meta:
        ordering = ["ended"]
        # Quotas and the Usage page: one person's spans over the last days or weeks, and everyone's.
        indexes = [
            models.Index(fields=["owner", "ended"], name="jobs_deviceuse_owner_idx"),
            models.Index(fields=["ended"], name="jobs_deviceuse_ended_idx"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.seconds:.0f} s"


def waiting_on(device_id: int) -> list[Job]:
    """The device's waiting jobs, in no order: every reader (dispatch's pick, the plan, the queue page) orders
    them by the scheduler's full key ending in the id. No ORDER BY on purpose: the model's default "-created"
    made SQLite walk the device's whole history by date instead of its few waiting rows (25 -> 5 ms at 100k)."""
    return list(Job.objects.filter(device_id=device_id, state__in=WAITING_STATES).order_by())


class RetentionRule(models.Model):
    """How long results are kept (``jobs.queue.retention``), set by admins: the household's rule (``user`` NULL)
    or one person's, which replaces the household's for them. Either limit may be empty; both: whichever removes
    more. Bookmarked results and results something else keeps (``retention.kept_by_others``) stay."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="retention_rule",
    )
    keep_days = models.PositiveIntegerField(null=True, blank=True)  # results older than this go
    keep_gb = models.FloatField(null=True, blank=True)  # beyond the newest this many GB, results go
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(user__isnull=True), name="jobs_retention_one_household"
            )
        ]

    def __str__(self) -> str:
        return f"retention of {self.user or 'the household'}"


class RetentionNotice(models.Model):
    """A result a retention rule will move to the trash at ``due_at`` (a week after it was announced): shown on
    the Retention pages and told to its owner; removed when it goes, or when the rule no longer takes it."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="retention_notice")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    announced_at = models.DateTimeField()
    due_at = models.DateTimeField(db_index=True)
    reason = models.CharField(max_length=200)

    class Meta:
        ordering = ["due_at", "job_id"]
        indexes = [models.Index(fields=["owner", "due_at"], name="jobs_retention_owner_idx")]

    def __str__(self) -> str:
        return f"job {self.job_id} to the trash at {self.due_at:%Y-%m-%d}"
