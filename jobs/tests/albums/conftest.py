"""The album cast: mia owns the album, otto contributes, vic (a household viewer) views, sam is a stranger; ada is
an admin. Each has a finished result of their own where it matters."""

from __future__ import annotations

import pytest

from jobs.queue.albums import album_create, album_invite
from jobs.tests.ui_fixtures import PNG, add_artifact, make_job


def finished(owner, device, media, *, prompt: str = "a red fox", shared: bool = False, kind: str = "video"):
    """A finished job with a result and a thumbnail."""
    job = make_job(owner, device, state="done", prompt=prompt, shared=shared, kind=kind)
    add_artifact(job, media)
    add_artifact(job, media, kind="thumb", name="thumb.png", mime="image/png", data=PNG)
    return job


@pytest.fixture
def stranger(db):
    from conftest import _person

    return _person("sam", "member")


@pytest.fixture
def album(member, other_member, viewer):
    album = album_create(by=member, name="Summer")
    album_invite(album=album, by=member, username=other_member.username, role="contributor")
    album_invite(album=album, by=member, username=viewer.username, role="viewer")
    return album
