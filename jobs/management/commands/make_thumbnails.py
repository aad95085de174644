"""Make the gallery's thumbnails for finished jobs that have none (results from before thumbnails existed)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from jobs.files.thumbnails import backfill
from jobs.models import Job, JobState


class Command(BaseCommand):
    help = "Make missing thumbnails for done jobs (video poster, 3D source image, waveform, image)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--job", type=int, action="append", help="only this job (repeatable)")
        parser.add_argument("--redo", action="store_true", help="remake thumbnails that already exist")

    def handle(self, *args, **opts) -> None:
        jobs = Job.objects.filter(state=JobState.DONE).select_related("owner").order_by("pk")
        if opts["job"]:
            jobs = jobs.filter(pk__in=opts["job"])
            missing = set(opts["job"]) - set(jobs.values_list("pk", flat=True))
            if missing:
                raise CommandError(f"no finished job with id {', '.join(map(str, sorted(missing)))}")
        counts = backfill(jobs=jobs.iterator(chunk_size=200), redo=opts["redo"])
        self.stdout.write(
            f"made {counts['made']} thumbnail(s); {counts['had']} job(s) had one, "
            f"{counts['none']} have no result to show, {counts['failed']} failed (see the log)"
        )
        if counts["failed"]:
            raise CommandError(f"{counts['failed']} thumbnail(s) could not be made")
