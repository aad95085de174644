# The THUMB artifact kind (jobs.thumbnails). Choices only: no column changes, so this is state-only on every
# database (Django does not rebuild a table for a change of choices).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0003_job_submit_token"),
    ]

    operations = [
        migrations.AlterField(
            model_name="artifact",
            name="kind",
            field=models.CharField(
                choices=[
                    ("video", "Video"),
                    ("audio", "Audio"),
                    ("mesh", "3D model"),
                    ("image", "Image"),
                    ("sidecar", "Sidecar"),
                    ("thumb", "Thumbnail"),
                ],
                max_length=10,
            ),
        ),
    ]
