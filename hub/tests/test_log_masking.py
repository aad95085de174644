"""Issue 34 item 6: no log line holds a token. Share links, invitations, password resets and API tokens are masked
in the web server's access log and in Django's and Celery's lines, and the masked line still names the route."""

from __future__ import annotations

import io
import logging

import httpx
import pytest
from celery import signals
from django.contrib.auth.tokens import default_token_generator
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from hub.accounts.invitations import invitation_create
from hub.accounts.tokens import token_create
from hub.logfilters import MaskTokens, mask_tokens
from hub.testing import start_asgi_server
from jobs.queue.services import job_share_link
from jobs.tests.ui_fixtures import device, make_job  # noqa: F401 - device: a fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.integration
def test_the_web_servers_log_names_each_route_but_holds_no_token(member, admin_user, device):  # noqa: F811
    job = job_share_link(job=make_job(member, device, state="done"), by=member, enable=True)
    _, invitation = invitation_create(role="member", created_by=admin_user)
    _, api_token = token_create(user=member, name="laptop", scopes=["read"])
    uid, reset = urlsafe_base64_encode(force_bytes(member.pk)), default_token_generator.make_token(member)
    secrets = {"share": job.share_token, "invitation": invitation, "reset": reset, "api": api_token}
    secrets["unknown share"] = "not-a-real-share-token-0123456789"
    proc = start_asgi_server(workers=1)
    try:
        url = proc.extra["url"]
        answers = [
            httpx.get(f"{url}/jobs/shared/{job.share_token}/").status_code,
            httpx.get(f"{url}/jobs/shared/{secrets['unknown share']}/").status_code,
            httpx.get(f"{url}/accounts/invite/{invitation}/").status_code,
            httpx.get(f"{url}/accounts/password/reset/{uid}/{reset}/").status_code,
            httpx.get(f"{url}/api/jobs?token={api_token}").status_code,
            httpx.get(f"{url}/api/jobs", headers={"Authorization": f"Bearer {api_token}"}).status_code,
        ]
    finally:
        proc.stop()  # its output is all in the file once it has stopped
    assert answers[:4] == [200, 404, 200, 302], answers
    log = proc.log_text()
    assert [name for name, secret in secrets.items() if secret in log] == []
    for line in (
        '"GET /jobs/shared/***/ HTTP/1.1" 200',
        '"GET /jobs/shared/***/ HTTP/1.1" 404',
        "Not Found: /jobs/shared/***/",  # Django's own line (django.request)
        '"GET /accounts/invite/***/ HTTP/1.1" 200',
        '"GET /accounts/password/reset/***/***/ HTTP/1.1" 302',
        '"GET /api/jobs?token=*** HTTP/1.1"',
    ):
        assert line in log, f"{line!r} not in:\n{log}"


def test_celerys_own_handlers_get_the_mask_when_it_sets_up_its_logging():
    stream = io.StringIO()
    logger = logging.getLogger("hub.tests.celery-like")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        # What Celery sends once it has replaced the root logger's handlers with its own (worker and beat).
        signals.after_setup_logger.send(
            sender=None, logger=logger, loglevel=20, logfile=None, format="", colorize=False
        )
        logger.warning(
            "could not fetch %s for %s", "/jobs/shared/s3cr3t-share/files/2/", "Bearer thub_abcdefghij"
        )
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "could not fetch /jobs/shared/***/files/2/ for Bearer ***\n"


def test_a_token_placeholder_in_the_format_is_masked_with_its_value(caplog):
    logging.getLogger("hub.tests.masking").addFilter(mask := MaskTokens())
    try:
        with caplog.at_level(logging.INFO, logger="hub.tests.masking"):
            logging.getLogger("hub.tests.masking").info(
                "polling %s?token=%s (try %d)", "/metrics", "s3cr3t", 2
            )
    finally:
        logging.getLogger("hub.tests.masking").removeFilter(mask)
    assert caplog.messages == ["polling /metrics?token=*** (try 2)"]


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        (
            "/accounts/login/?next=%2Fjobs%2Fshared%2Fs3cr3t%2F",
            "/accounts/login/?next=%2Fjobs%2Fshared%2F***%2F",
        ),
        ("token thub_Zm9vYmFyYmF6cXV4 in a message", "token thub_*** in a message"),
        ("/metrics?token=abc&x=1", "/metrics?token=***&x=1"),
        ("/accounts/password/reset/done/", "/accounts/password/reset/done/"),
        ("/accounts/people/invitations/new/", "/accounts/people/invitations/new/"),
        ("/jobs/12/share-link/", "/jobs/12/share-link/"),
    ],
)
def test_the_mask_keeps_the_route_and_takes_only_the_secret(line, masked):
    assert mask_tokens(line) == masked
