"""An album's people watch its private results live, and lose them the moment they are removed.

Through ``hub.asgi.application`` (origin validator, session auth, router) over the run's real Redis channel layer,
with session cookies from real sign-ins, as ``hub/tests/test_ws_access.py`` does.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from hub.testing import run_async
from hub.tests.test_ws_access import Socket, signed_in
from jobs.queue import albums as svc
from jobs.tests.albums.conftest import finished

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_a_removed_member_stops_receiving_a_private_result_at_once(member, viewer, device, media):
    from jobs.core.transitions import job_note

    album = svc.album_create(by=member, name="Summer")
    svc.album_invite(album=album, by=member, username=viewer.username, role="viewer")
    job = finished(member, device, media, prompt="our private beach")
    later = [finished(member, device, media, prompt=f"later {i}") for i in range(2)]
    svc.album_add_jobs(album=album, by=member, job_ids=[job.pk])
    owner, vic = signed_in(member), signed_in(viewer)

    async def scenario():
        watch = f"job:{job.pk},album:{album.pk}"
        mine = await Socket(owner, watch).open()
        theirs = await Socket(vic, watch).open()
        assert any(f'id="job-{job.pk}-events"' in t for t in theirs.texts)  # the album lets vic watch it
        await sync_to_async(job_note)(job.pk, "A first note everyone in the album sees.")
        add = {"job": later[0].pk, "album": album.pk}
        assert (await sync_to_async(owner.post)("/jobs/albums/add/", add)).status_code == 302
        before = await theirs.drain()
        # The owner removes vic through the page's own form; then the job moves on.
        response = await sync_to_async(owner.post)(f"/jobs/albums/{album.pk}/people/remove/", {"user": "vic"})
        assert response.status_code == 302
        await theirs.drain()
        await sync_to_async(job_note)(job.pk, "A second note about the secret plan.")
        add = {"job": later[1].pk, "album": album.pk}
        assert (await sync_to_async(owner.post)("/jobs/albums/add/", add)).status_code == 302
        after_mine, after_theirs = await mine.drain(), await theirs.drain()
        await mine.close()
        await theirs.close()
        return before, after_mine, after_theirs, theirs.closed

    album_id = album.pk
    before, after_mine, after_theirs, closed = run_async(scenario)
    assert any("first note" in t for t in before), before  # live while a member (the album is its audience)
    assert any(f'id="album-{album_id}-news"' in t for t in before), (
        before
    )  # the album page hears of additions
    assert any("secret plan" in t for t in after_mine)  # the pushes happened
    assert any(f'id="album-{album_id}-news"' in t for t in after_mine)
    assert not any("secret plan" in t or "-news" in t for t in after_theirs), after_theirs
    assert not closed  # still signed in: the page keeps its other live parts
