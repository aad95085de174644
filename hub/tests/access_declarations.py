"""What each person gets from each view: the access matrix's declarations (``test_access_matrix``).

One line per URL name. Each method maps to five outcomes, in the order of ``ROLES``:

    anon  viewer  owner  other  admin

``owner`` is the member who owns the private job named in the URL (and the device, token and link the URL
names are the world's, see ``matrix_support.build_world``); ``other`` is another member. Outcome classes:

- ``ok``           2xx, or a redirect that is not to a sign-in page (a POST's "done, back to the page")
- ``login``        redirect to the sign-in page
- ``admin-login``  redirect to the admin site's sign-in page
- ``400``          400 or 422: the request (here an empty form or ``{}``) is refused with a message
- ``401`` ``403`` ``404`` ``405``  as said; ``a|b`` accepts either

Views whose URL names a job are requested twice: with the owner's *private* job and with a job *shared* with
the household. ``"shared"`` holds the outcomes that differ for the shared one (``"same"``: none differ);
``"foreign"`` likewise for a read-only link asked for another job's file (see ``variants``).
HEAD, when a view answers it, is declared like GET unless it says otherwise.

The admin site is one prefix rule: admins only; everyone else is sent to the admin's sign-in page.
"""

from __future__ import annotations

ANY = "?"  # only while drafting with ACCESS_MATRIX_OBSERVE=1

# Shorthands for lines that recur.
NO = "login 405 405 405 405"  # the method this page does not take, for everyone signed in
EVERYONE = "login ok ok ok ok"  # any signed-in person
ADMINS = "login 403 403 403 ok"
ADMINS_NOT_THIS_METHOD = "login 403 403 403 405"  # the role check comes first: non-admins learn nothing more
PUBLIC = "ok ok ok ok ok"
PUBLIC_NO = "405 405 405 405 405"
PRIVATE_JOB = "login 404 ok 404 ok"  # someone else's private job is exactly like a missing one
SHARED_JOB = "login ok ok ok ok"
MANAGE_PRIVATE = "login 404 ok 404 ok"  # cancel, retry, share: the owner and admins; others don't see it
MANAGE_SHARED = "login 403 ok 403 ok"  # a shared job: others see it, but may not change it
API_NO = "405 405 405 405 405"  # ninja answers the method before it asks who you are
API_READ = "401 ok ok ok ok"
API_PRIVATE = "401 404 ok 404 ok"
API_SUBMIT_EMPTY = "401 403 400 400 400"  # {} is refused with a message; a viewer's token may not submit
API_OWN_CHANNEL = "401 404 ok 404 404"  # the owner's notification channel: nobody else's, not even an admin's
API_CHANGE_CHANNEL = "401 403 ok 404 404"

DECLARATIONS: dict[str, dict] = {
    # -- hub ----------------------------------------------------------------------------------------------
    "dashboard": {"GET": EVERYONE, "POST": NO},
    "hub-live-wire": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},  # the live-wire card is admins' only
    # 503 while no worker has checked in (the test run has none); details only for admins (test_healthz)
    "healthz": {"GET": "ok|503 ok|503 ok|503 ok|503 ok|503", "POST": PUBLIC_NO},
    "hub-health": {"GET": ADMINS, "POST": ADMINS_NOT_THIS_METHOD},  # the readable status page (footer link)
    # the test client's address is loopback, which HUB_METRICS_ALLOW lets in by default (test_metrics)
    "metrics": {"GET": PUBLIC, "POST": PUBLIC_NO},
    "favicon": {"GET": PUBLIC, "POST": PUBLIC_NO},
    "manifest": {"GET": PUBLIC, "POST": PUBLIC_NO},
    # -- accounts (sign-in and password change answer an invalid form with 400 and the form) ---------------------
    "login": {
        "GET": PUBLIC,
        "POST": "400 ok ok ok ok",
    },  # an empty sign-in is an invalid form: 400 with the form
    "logout": {"GET": NO, "POST": "login login login login login"},
    "password_change": {
        "GET": EVERYONE,
        "POST": "login 400 400 400 400",
    },  # an empty change: 400 with the form
    "password_change_done": {"GET": EVERYONE, "POST": NO},
    "people": {"GET": ADMINS, "POST": "login 403 403 403 405"},
    "people-add": {"GET": ADMINS_NOT_THIS_METHOD, "POST": "login 403 403 403 400"},
    "people-role": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},  # {} : a message, back to the list
    "people-active": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    # invitations and one-time passwords (the People page's admin side); {} for a one-time password is fine:
    # the person is in the URL, and the answer shows the password once
    "people-invite": {"GET": ADMINS_NOT_THIS_METHOD, "POST": "login 403 403 403 400"},
    "people-invite-revoke": {"GET": ADMINS_NOT_THIS_METHOD, "POST": "login 403 403 403 404"},
    "people-password": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    "people-unlock": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    # groups (jobs.doors.group_views): admins only, the role checked first; an empty new group is a form error,
    # and the world's group id names none (jobs/tests/quotas/test_groups.py holds a real one's pages)
    "groups": {"GET": ADMINS, "POST": "login 403 403 403 400"},
    "groups-edit": {"GET": "login 403 403 403 404", "POST": "login 403 403 403 404"},
    "groups-member": {"GET": ADMINS_NOT_THIS_METHOD, "POST": "login 403 403 403 404"},
    "groups-delete": {"GET": "login 403 403 403 404", "POST": "login 403 403 403 404"},
    # the signed-out pages: an invitation link (the world has none: every link is unknown) and password
    # resets by email (the test run's locmem backend counts as configured; a bad reset link is a page saying so)
    "accounts-invitation-accept": {"GET": "404 404 404 404 404", "POST": "404 404 404 404 404"},
    "password_reset": {"GET": PUBLIC, "POST": "400 400 400 400 400"},  # {}: the email is missing
    "password_reset_done": {"GET": PUBLIC, "POST": PUBLIC_NO},
    "password_reset_confirm": {"GET": PUBLIC, "POST": PUBLIC},
    "password_reset_complete": {"GET": PUBLIC, "POST": PUBLIC_NO},
    "accounts-settings": {"GET": EVERYONE, "POST": "login ok ok ok ok"},  # {}: every field may be empty
    # two factors: the code after the password is signed-out (without a password just checked: back to sign-in);
    # one's own authenticator and recovery codes ({} : a wrong code, 400 on the setup page, a message elsewhere)
    "accounts-2fa-code": {"GET": "login login login login login", "POST": "login login login login login"},
    "accounts-2fa": {"GET": EVERYONE, "POST": NO},
    "accounts-2fa-setup": {"GET": EVERYONE, "POST": "login 400 400 400 400"},
    "accounts-2fa-codes": {"GET": NO, "POST": "login ok ok ok ok"},
    "accounts-2fa-off": {"GET": NO, "POST": "login ok ok ok ok"},
    # OpenID Connect, not configured in the test run: both lead back to the sign-in page
    "oidc_authentication_init": {"GET": "login login login login login", "POST": "405 405 405 405 405"},
    "oidc_authentication_callback": {"GET": "login login login login login", "POST": "405 405 405 405 405"},
    "accounts-tokens": {"GET": EVERYONE, "POST": NO},
    "accounts-audit": {"GET": ADMINS, "POST": "login 403 403 403 405"},
    "accounts-tokens-add": {"GET": NO, "POST": "login 400 400 400 400"},
    # the owner's spare token: someone else's is "not found"; admins may revoke anyone's
    "accounts-tokens-revoke": {"GET": NO, "POST": "login 404 ok 404 ok"},
    # -- devices ----------------------------------------------------------------------------------------------
    "devices-list": {"GET": EVERYONE, "POST": NO},
    "devices-detail": {"GET": EVERYONE, "POST": NO},
    "devices-metrics": {"GET": EVERYONE, "POST": NO},
    "devices-add": {"GET": ADMINS, "POST": "login 403 403 403 400"},
    "devices-add-test": {"GET": ADMINS_NOT_THIS_METHOD, "POST": "login 403 403 403 400"},
    "devices-find": {"GET": ADMINS, "POST": ADMINS},
    "devices-edit": {"GET": ADMINS, "POST": "login 403 403 403 400"},
    "devices-test": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    # -- jobs -------------------------------------------------------------------------------------------------
    "jobs-gallery": {"GET": EVERYONE, "POST": NO},
    # the zip of everything the person may see (or back to the gallery with why not); its button's count
    "jobs-download": {"GET": EVERYONE, "POST": NO},
    "jobs-download-summary": {"GET": EVERYONE, "POST": NO},
    "jobs-new": {"GET": EVERYONE, "POST": "login 403 400 400 400"},  # a viewer's page says why not
    "jobs-admission": {"GET": "login 403 405 405 405", "POST": "login 403 ok ok ok"},
    # Filling the form from a picture: an empty POST (no picture) is told the file carries no settings.
    "jobs-from-file": {"GET": "login 403 405 405 405", "POST": "login 403 400 400 400"},
    "jobs-queue": {"GET": EVERYONE, "POST": NO},
    "jobs-sparkline": {"GET": EVERYONE, "POST": NO},
    "jobs-queue-pause": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    "jobs-queue-resume": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    # The read-only link: its token is the permission, for that job's files only ("foreign": the private
    # job's file asked for through the link of another job).
    "jobs-public": {
        "GET": PUBLIC,
        "POST": PUBLIC,
    },  # POST gives the link's password; without one, back to GET
    "jobs-public-file": {"GET": PUBLIC, "POST": PUBLIC_NO, "foreign": {"GET": "404 404 404 404 404"}},
    "jobs-detail": {"GET": PRIVATE_JOB, "POST": NO, "shared": {"GET": SHARED_JOB}},
    "jobs-npu": {"GET": PRIVATE_JOB, "POST": NO, "shared": {"GET": SHARED_JOB}},
    "jobs-next": {"GET": PRIVATE_JOB, "POST": NO, "shared": {"GET": SHARED_JOB}},
    # members only (a viewer is told so before anything is looked up); {} is an invalid form
    "jobs-again": {
        "GET": "login 403 ok 404 ok",
        "POST": "login 403 400 404 400",
        "shared": {"GET": "login 403 ok ok ok", "POST": "login 403 400 400 400"},
    },
    # a finished job can't be cancelled or retried: a message on the job page (a redirect), not an error
    "jobs-cancel": {"GET": NO, "POST": MANAGE_PRIVATE, "shared": {"POST": MANAGE_SHARED}},
    # a batch (jobs.queue.batches) as one: the private job's batch, then the shared job's
    "jobs-batch-cancel": {"GET": NO, "POST": MANAGE_PRIVATE, "shared": {"POST": MANAGE_SHARED}},
    "jobs-retry": {"GET": NO, "POST": MANAGE_PRIVATE, "shared": {"POST": MANAGE_SHARED}},
    "jobs-share": {"GET": NO, "POST": MANAGE_PRIVATE, "shared": {"POST": MANAGE_SHARED}},
    "jobs-share-link": {"GET": NO, "POST": MANAGE_PRIVATE, "shared": {"POST": MANAGE_SHARED}},
    "jobs-share-link-options": {"GET": NO, "POST": MANAGE_PRIVATE, "shared": {"POST": MANAGE_SHARED}},
    "jobs-bookmark": {"GET": NO, "POST": PRIVATE_JOB, "shared": {"POST": SHARED_JOB}},
    "jobs-queue-move": {"GET": ADMINS_NOT_THIS_METHOD, "POST": "login 403 403 403 400", "shared": "same"},
    "jobs-queue-run-next": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS, "shared": "same"},
    "jobs-file": {"GET": PRIVATE_JOB, "POST": NO, "shared": {"GET": SHARED_JOB}},
    # A job's inputs and live preview (jobs.files.inputs): the world's jobs have none, so whoever may see the job
    # gets a 404 like everyone else; jobs/tests/files/test_thumbnails.py holds the 200s (owner, admin, shared, link).
    "jobs-input": {"GET": "login 404 404 404 404", "POST": NO, "shared": "same"},
    "jobs-public-input": {"GET": "404 404 404 404 404", "POST": PUBLIC_NO},
    "jobs-preview": {"GET": "login 404 404 404 404", "POST": NO, "shared": "same"},
    # a finished job's box is empty (200): it takes itself off the page
    "jobs-preview-box": {"GET": PRIVATE_JOB, "POST": NO, "shared": {"GET": SHARED_JOB}},
    # -- presets (jobs.doors.preset_views): one's own and the household's; another person's preset (the world's is
    # the owner's) is "not found" for everyone else, admins too. Viewers see the page but keep no presets.
    "jobs-presets": {"GET": EVERYONE, "POST": NO},
    "jobs-presets-export": {"GET": EVERYONE, "POST": NO},
    "jobs-presets-save": {"GET": "login 403 405 405 405", "POST": "login 403 400 400 400"},  # {}: no name
    "jobs-presets-import": {"GET": "login 403 405 405 405", "POST": "login 403 400 400 400"},  # {}: no file
    "jobs-preset-rename": {"GET": "login 403 405 405 405", "POST": "login 403 400 404 404"},  # {}: no name
    "jobs-preset-delete": {"GET": "login 403 ok 404 404", "POST": "login 403 ok 404 404"},
    "jobs-preset-export": {"GET": "login 404 ok 404 404", "POST": NO},
    # -- albums (jobs.doors.album_views): the world's album is the owner's and holds the private job; nobody else
    # is in it, so it is "not found" for everyone else, admins too. {} renames, invites, removes nothing: a message.
    "jobs-albums": {"GET": EVERYONE, "POST": NO},
    "jobs-album-create": {"GET": NO, "POST": "login ok ok ok ok"},  # {}: no name, a message on the list
    "jobs-album-add": {"GET": "login 404 404 404 404", "POST": "login 404 404 404 404"},  # no ?job=: no job
    "jobs-album": {"GET": "login 404 ok 404 404", "POST": NO},
    "jobs-album-rename": {"GET": NO, "POST": "login 404 ok 404 404"},
    # the zip of what the album lets one see
    "jobs-album-download": {"GET": "login 404 ok 404 404", "POST": NO},
    "jobs-album-delete": {"GET": "login 404 ok 404 404", "POST": "login 404 ok 404 404"},
    "jobs-album-invite": {"GET": NO, "POST": "login 404 ok 404 404"},
    "jobs-album-member-remove": {"GET": NO, "POST": "login 404 ok 404 404"},
    "jobs-album-item-remove": {"GET": NO, "POST": "login 404 ok 404 404"},
    # the album's read-only link: its owner's (the world's album has no link, so its owner makes one)
    "jobs-album-share-link": {"GET": NO, "POST": "login 404 ok 404 404"},
    "jobs-album-share-link-options": {
        "GET": NO,
        "POST": "login 404 ok 404 404",
    },  # {}: "create the link first"
    # the album's link page and files, signed out: the world's token is a job's link, which opens no album
    # (jobs/tests/albums/test_album_share_link.py holds the 200s, 410s and 403s)
    "jobs-album-public": {"GET": "404 404 404 404 404", "POST": "404 404 404 404 404"},
    "jobs-album-public-file": {"GET": "404 404 404 404 404", "POST": PUBLIC_NO},
    # -- quotas and usage (jobs.doors.quota_views): everyone's own usage page; results deleted by their owner or an
    # admin (a confirmation page, then the POST); the limit forms of the People page are admins' only
    "usage": {"GET": EVERYONE, "POST": NO},
    "usage-results-delete": {
        "GET": MANAGE_PRIVATE,
        "POST": MANAGE_PRIVATE,
        "shared": {"GET": MANAGE_SHARED, "POST": MANAGE_SHARED},
    },
    # -- the trash (jobs.doors.trash_views): each person's own; the world's job is not in the trash, so every
    # view that names it is "not found" for everyone (a stranger's trashed job is exactly like that too)
    "jobs-trash": {"GET": EVERYONE, "POST": NO},
    # retention: everyone's own announced results; the rules are the admins' ({}: the household's rule removed)
    "jobs-retention": {"GET": EVERYONE, "POST": NO},
    "jobs-retention-rule": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    "jobs-trash-empty": {"GET": EVERYONE, "POST": EVERYONE},  # one's own trash only
    "jobs-trash-restore": {"GET": NO, "POST": "login 404 404 404 404", "shared": "same"},
    "jobs-trash-purge": {"GET": "login 404 404 404 404", "POST": "login 404 404 404 404", "shared": "same"},
    "jobs-trash-thumb": {"GET": "login 404 404 404 404", "POST": NO, "shared": "same"},
    "quota-defaults": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},  # {} changes nothing: a message
    "quota-person": {"GET": ADMINS_NOT_THIS_METHOD, "POST": ADMINS},
    # -- notifications (notify/): everyone's own channels; the household's for admins. A channel is its owner's
    # alone (an admin gets "not found" for a person's channel too); an empty edit form is valid (every box unticked)
    "notify-home": {"GET": EVERYONE, "POST": NO},
    "notify-household": {"GET": ADMINS, "POST": ADMINS_NOT_THIS_METHOD},
    "notify-channel-add": {"GET": NO, "POST": "login 400 400 400 400"},
    "notify-channel-edit": {"GET": "login 404 ok 404 404", "POST": "login 404 ok 404 404"},
    "notify-channel-delete": {"GET": NO, "POST": "login 404 ok 404 404"},
    "notify-channel-test": {"GET": NO, "POST": "login 404 ok 404 404"},
    # the world's channel is a webhook: "nothing to resend" is a message on the page it goes back to
    "notify-channel-confirm-resend": {"GET": NO, "POST": "login 404 ok 404 404"},
    # an email confirmation's link, signed out like the mailbox that opens it (the world's token is no such link)
    "notify-confirm": {"GET": "404 404 404 404 404", "POST": "404 404 404 404 404"},
    "notify-job-deliveries": {"GET": "login 404 ok 404 404", "POST": NO, "shared": "same"},
    "notify-push-key": {"GET": EVERYONE, "POST": NO},
    "notify-push-subscribe": {"GET": NO, "POST": "login 400 400 400 400"},  # {} holds no subscription
    "notify-push-unsubscribe": {"GET": NO, "POST": "login 400 400 400 400"},
    "notify-sw": {"GET": PUBLIC, "POST": PUBLIC_NO},  # the service worker: static code, no data
    # which private hosts channels may reach: admins' (an empty form is refused with a message)
    "notify-private-hosts": {"GET": ADMINS, "POST": "login 403 403 403 400"},
    "notify-private-host-delete": {"GET": NO, "POST": ADMINS},
    # -- REST API (Bearer tokens; a viewer's token reads only) ------------------------------------------------
    # ninja's own schema views answer any method; they show nothing private
    "api:openapi-json": {"GET": PUBLIC, "POST": PUBLIC},
    "api:openapi-view": {"GET": PUBLIC, "POST": PUBLIC},
    "api:ping": {"GET": PUBLIC, "POST": PUBLIC_NO},
    "api:audit_list": {"GET": "401 403 403 403 ok", "POST": API_NO},
    "api:api-root": {"GET": "404 404 404 404 404", "POST": "404 404 404 404 404"},
    "api:job_submit": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},  # one route, two names
    "api:job_list": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},
    # one route, two names: DELETE moves the job to the trash (the owner's and admins'; a read token: 403)
    **{
        name: {
            "GET": API_PRIVATE,
            "POST": API_NO,
            "DELETE": "401 403 ok 404 ok",
            "shared": {"GET": API_READ, "DELETE": "401 403 ok 403 ok"},
        }
        for name in ("api:job_get", "api:job_delete")
    },
    "api:job_restore": {"GET": API_NO, "POST": "401 403 404 404 404", "shared": "same"},
    "api:job_download": {"GET": API_READ, "POST": API_NO},  # the zip of what the token's person may see
    # the scope is checked first (a read token learns nothing); a finished job can't be cancelled: 422
    "api:job_cancel": {
        "GET": API_NO,
        "POST": "401 403 400 404 400",
        "shared": {"POST": "401 403 400 403 400"},
    },
    "api:job_retry": {
        "GET": API_NO,
        "POST": "401 403 400 404 400",
        "shared": {"POST": "401 403 400 403 400"},
    },
    # {} means "again, unchanged": a new job for whoever may see this one
    "api:job_again": {"GET": API_NO, "POST": "401 403 ok 404 ok", "shared": {"POST": "401 403 ok ok ok"}},
    # the body ({"shared": …}) is validated before anything is looked up: {} is a 422 for everyone
    "api:job_share": {"GET": API_NO, "POST": "401 400 400 400 400", "shared": "same"},
    "api:job_artifact": {"GET": API_PRIVATE, "POST": API_NO, "shared": {"GET": API_READ}},
    # batches: {} has no jobs (422); a batch is seen as its jobs are; cancelling is the owner's and admins'
    "api:batch_submit": {"GET": API_NO, "POST": API_SUBMIT_EMPTY},
    "api:batch_get": {"GET": API_PRIVATE, "POST": API_NO, "shared": {"GET": API_READ}},
    "api:batch_cancel": {
        "GET": API_NO,
        "POST": "401 403 ok 404 ok",
        "shared": {"POST": "401 403 ok 403 ok"},
    },
    "api:device_list": {"GET": API_READ, "POST": API_NO},
    "api:device_get": {"GET": API_READ, "POST": API_NO},
    "api:device_capabilities": {"GET": API_READ, "POST": API_NO},
    "api:device_metrics": {"GET": API_READ, "POST": API_NO},
    "api:device_metric_history": {"GET": API_READ, "POST": API_NO},
    "api:device_plan": {"GET": API_READ, "POST": API_NO},
    "api:pool_plan": {"GET": API_READ, "POST": API_NO},
    "api:usage": {"GET": API_READ, "POST": API_NO},
    # the queue's controls are the admins'; a viewer's token only reads. The matrix's job is finished: 422
    "api:device_pause": {"GET": API_NO, "POST": "401 403 403 403 ok"},
    "api:device_resume": {"GET": API_NO, "POST": "401 403 403 403 ok"},
    "api:job_move": {"GET": API_NO, "POST": "401 400 400 400 400", "shared": "same"},  # {} has no direction
    "api:job_run_next": {
        "GET": API_NO,
        "POST": "401 403 403 404 400",
        "shared": {"POST": "401 403 403 403 400"},
    },
    # notification channels: as on the pages, a channel is its owner's alone (an admin gets 404 for a person's
    # one too); a viewer's token only reads, so its changes are 403 before the channel is looked up
    "api:notify_channel_list": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},  # one route, two names
    "api:notify_channel_create": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},
    **{
        name: {
            "GET": API_OWN_CHANNEL,
            "POST": API_NO,
            "PATCH": API_CHANGE_CHANNEL,
            "DELETE": API_CHANGE_CHANNEL,
        }
        for name in ("api:notify_channel_get", "api:notify_channel_update", "api:notify_channel_delete")
    },  # one route, three names; PATCH {} changes nothing
    "api:notify_channel_test": {"GET": API_NO, "POST": API_CHANGE_CHANNEL},
    # a webhook has no address to confirm: 422 with the message
    "api:notify_channel_confirm_resend": {"GET": API_NO, "POST": "401 403 400 404 404"},
    "api:notify_channel_deliveries": {"GET": API_OWN_CHANNEL, "POST": API_NO},
    # presets: one's own and the household's (the world's is the owner's: nobody else's, not even an admin's)
    "api:preset_list": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},  # one route, two names
    "api:preset_create": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},
    "api:preset_export": {"GET": API_READ, "POST": API_NO},
    "api:preset_import": {"GET": API_NO, "POST": API_SUBMIT_EMPTY},
    **{
        name: {
            "GET": API_OWN_CHANNEL,
            "POST": API_NO,
            "PATCH": API_CHANGE_CHANNEL,
            "DELETE": API_CHANGE_CHANNEL,
        }
        for name in ("api:preset_get", "api:preset_update", "api:preset_delete")
    },  # one route, three names; PATCH {} changes nothing
    # albums: the world's is the owner's (holding the private job); nobody else's, not even an admin's. A viewer's
    # token only reads: every change is its 403 before anything is looked up.
    "api:album_list": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},  # one route, two names
    "api:album_create": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},
    **{
        name: {
            "GET": API_OWN_CHANNEL,
            "POST": API_NO,
            "PATCH": "401 403 400 404 404",
            "DELETE": API_CHANGE_CHANNEL,
        }
        for name in ("api:album_get", "api:album_update", "api:album_delete")
    },  # one route, three names; PATCH {}: no name
    "api:album_add": {"GET": API_NO, "POST": "401 403 400 404 404"},  # {}: no jobs
    "api:album_download": {"GET": API_OWN_CHANNEL, "POST": API_NO},  # the zip of what the album lets one see
    # the private job is in the album; the shared one is not (a 422 saying so)
    "api:album_remove": {
        "GET": API_NO,
        "POST": API_NO,
        "DELETE": API_CHANGE_CHANNEL,
        "shared": {"DELETE": "401 403 400 404 404"},
    },
    "api:album_invite": {"GET": API_NO, "POST": "401 403 400 404 404"},  # {}: no user
    "api:album_uninvite": {"GET": API_NO, "POST": API_NO, "DELETE": "401 403 400 404 404"},  # not a member
    # -- /v1 (OpenAI's shapes) ----------------------------------------------------------------------------
    "v1:videos": {"GET": API_READ, "POST": API_SUBMIT_EMPTY},
    "v1:video": {
        "GET": API_PRIVATE,
        "POST": API_NO,
        "DELETE": "401 403 ok 404 ok",
        "shared": {"GET": API_READ, "DELETE": "401 403 ok 403 ok"},
    },
    "v1:video-content": {"GET": API_PRIVATE, "POST": API_NO, "shared": {"GET": API_READ}},
    "v1:image-generations": {"GET": API_NO, "POST": API_SUBMIT_EMPTY},
    "v1:audio-speech": {"GET": API_NO, "POST": API_SUBMIT_EMPTY},
    "v1:file-content": {"GET": API_PRIVATE, "POST": API_NO, "shared": {"GET": API_READ}},
    "v1:models": {"GET": API_READ, "POST": API_NO},
    "v1:model": {"GET": API_READ, "POST": API_NO},
    "v1:unknown": {m: "401 404 404 404 404" for m in ("GET", "POST", "PUT", "PATCH", "DELETE")},
    "api:unknown": {m: "404 404 404 404 404" for m in ("GET", "POST", "PUT", "PATCH", "DELETE")},
}

# The admin site: admins only. The sign-in middleware sends anonymous people to the hub's sign-in page first;
# signed-in non-staff get the admin's own sign-in page. What an admin gets is Django's business, except
# that it must not be a 500: "ok|403|404|405" (add forms of read-only models are 403, GET-only views 405).
ADMIN_SITE = "login admin-login admin-login admin-login ok|403|404|405"
PREFIXES: dict[str, dict] = {
    "admin:": {"GET": ADMIN_SITE, "POST": ADMIN_SITE},
    "route:admin/": {"GET": ADMIN_SITE, "POST": ADMIN_SITE},
}
# The admin's views that are outside the sign-in middleware (login_not_required) or answer differently.
DECLARATIONS.update({
    "admin:index": {"GET": "admin-login admin-login admin-login admin-login ok", "POST": "admin-login admin-login admin-login admin-login ok"},
    # the admin site signs in through the hub's page (its throttling and second factor): a redirect there
    "admin:login": {"GET": "login login login login login", "POST": "login login login login login"},
    "route:admin/login/": {"GET": "login login login login login", "POST": "login login login login login"},
    "admin:logout": {"GET": "admin-login ok ok ok 405", "POST": "admin-login ok ok ok login"},
    "admin:app_list": {"GET": "admin-login admin-login admin-login admin-login ok", "POST": "admin-login admin-login admin-login admin-login ok"},
    "admin:password_change": {"GET": "admin-login admin-login admin-login admin-login ok", "POST": "admin-login admin-login admin-login admin-login ok"},
    "admin:password_change_done": {"GET": "admin-login admin-login admin-login admin-login ok", "POST": "admin-login admin-login admin-login admin-login 405"},
    "admin:autocomplete": {"GET": "admin-login admin-login admin-login admin-login 403", "POST": "admin-login admin-login admin-login admin-login 405"},
    "admin:jsi18n": {"GET": "admin-login admin-login admin-login admin-login ok", "POST": "admin-login admin-login admin-login admin-login 405"},
    "admin:view_on_site": {"GET": "admin-login admin-login admin-login admin-login 404", "POST": "admin-login admin-login admin-login admin-login 404"},
    "route:admin/(?P<url>.*)$": {"GET": "admin-login admin-login admin-login admin-login 404", "POST": "admin-login admin-login admin-login admin-login 404"},
})  # fmt: skip


def rule_for(key: str) -> dict | None:
    if key in DECLARATIONS:
        return DECLARATIONS[key]
    for prefix, rule in PREFIXES.items():
        if key.startswith(prefix):
            return rule
    return None


def expected(rule: dict, method: str, variant: str) -> list[str] | None:
    line = None
    for method_ in (method, "GET") if method == "HEAD" else (method,):
        override = rule.get(variant) if variant in ("shared", "foreign") else None
        line = (override.get(method_) if isinstance(override, dict) else None) or rule.get(method_)
        if line is not None:
            break
    if line is None:
        return None
    if line == ANY:
        return ["ok|login|admin-login|400|401|403|404|405|429|500|raised"] * 5
    return line.split()


def variants(pattern) -> tuple[str, ...]:
    """Which objects a URL is requested with (``matrix_support.kwarg_values``).

    A URL naming a job or one of its files: the private job, then the shared one. A read-only link: its own
    job's file, then ("foreign") the private job's file through that link.
    """
    if pattern.key.startswith(("admin:", "route:admin/")):
        return ("private",)
    if "token" in pattern.kwargs:
        return ("link", "foreign") if "artifact_id" in pattern.kwargs else ("link",)
    if {"job_id", "video_id", "artifact_id", "batch", "batch_id"} & set(pattern.kwargs):
        return ("private", "shared")
    return ("private",)


# -- websocket topics (``test_ws_matrix``) ------------------------------------------------------------------
# Per topic, in the order of ROLES: "yes" (the socket subscribes and gets the topic's snapshot), "no" (the
# socket is accepted but the topic is refused: nothing of it arrives), "refused" (no socket at all: anonymous).
# "job/private" is the owner's private job, "job/shared" a shared one, "mine" the owner's own rows.
TOPICS: dict[str, str] = {
    "job/private": "refused no yes no yes",
    "job/shared": "refused yes yes yes yes",
    "queue": "refused yes yes yes yes",  # the plan is everyone's (private jobs without their prompt)
    "device": "refused yes yes yes yes",  # the card and gauges; the address only in the admins' card
    "mine": "refused no yes no no",  # only your own id, even for an admin
    "plan": "refused yes yes yes yes",  # the queue plan alone, without the admins' controls
    "card": "refused yes yes yes yes",  # the device card alone (the address only in the admins' card)
    "wire": "refused no no no no",
    "album": "refused no yes no no",  # the owner's album: its people only (nobody else is in it), admins included  # an admin's own live-wire check: refused to anyone else, never a snapshot
}
