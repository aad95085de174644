from __future__ import annotations

from django.urls import path

from jobs.doors import preset_views, views, zip_views

urlpatterns = [
    path("", views.gallery, name="jobs-gallery"),
    path("download/", zip_views.download, name="jobs-download"),
    path("download/summary/", zip_views.download_summary, name="jobs-download-summary"),
    path("new/", views.job_new, name="jobs-new"),
    path("new/admission/", views.job_admission, name="jobs-admission"),
    path("new/from-file/", views.job_from_file, name="jobs-from-file"),
    path("queue/", views.queue, name="jobs-queue"),
    path("batches/<slug:batch>/cancel/", views.batch_cancel, name="jobs-batch-cancel"),
    path("presets/", preset_views.presets, name="jobs-presets"),
    path("presets/save/", preset_views.preset_save, name="jobs-presets-save"),
    path("presets/import/", preset_views.presets_import, name="jobs-presets-import"),
    path("presets/export/", preset_views.presets_export, name="jobs-presets-export"),
    path("presets/<int:preset_id>/rename/", preset_views.preset_rename, name="jobs-preset-rename"),
    path("presets/<int:preset_id>/delete/", preset_views.preset_delete, name="jobs-preset-delete"),
    path("presets/<int:preset_id>/export/", preset_views.preset_export, name="jobs-preset-export"),
    path("devices/<int:device_id>/sparkline/", views.device_sparkline, name="jobs-sparkline"),
    path("queue/<int:device_id>/pause/", views.queue_pause, name="jobs-queue-pause"),
    path("queue/<int:device_id>/resume/", views.queue_resume, name="jobs-queue-resume"),
    path("shared/<str:token>/", views.job_public, name="jobs-public"),
    path("shared/<str:token>/files/<int:artifact_id>/", views.job_public_file, name="jobs-public-file"),
    path("<int:job_id>/", views.job_detail, name="jobs-detail"),
    path("<int:job_id>/npu/", views.job_npu, name="jobs-npu"),
    path("<int:job_id>/next/", views.job_next, name="jobs-next"),
    path("<int:job_id>/again/", views.job_again, name="jobs-again"),
    path("<int:job_id>/cancel/", views.job_cancel, name="jobs-cancel"),
    path("<int:job_id>/retry/", views.job_retry, name="jobs-retry"),
    path("<int:job_id>/share/", views.job_share, name="jobs-share"),
    path("<int:job_id>/share-link/", views.job_share_link, name="jobs-share-link"),
    path("<int:job_id>/bookmark/", views.job_bookmark, name="jobs-bookmark"),
    path("<int:job_id>/move/", views.queue_move, name="jobs-queue-move"),
    path("<int:job_id>/run-next/", views.queue_run_next, name="jobs-queue-run-next"),
    path("<int:job_id>/files/<int:artifact_id>/", views.job_file, name="jobs-file"),
    path("<int:job_id>/inputs/<slug:name>/", views.job_input, name="jobs-input"),
    path("shared/<str:token>/inputs/<slug:name>/", views.job_public_input, name="jobs-public-input"),
    path("<int:job_id>/preview/", views.job_preview, name="jobs-preview"),
    path("<int:job_id>/preview/box/", views.job_preview_box, name="jobs-preview-box"),
]
