"""Stored state messages used to end with the device's address ("The device cannot be reached. (http://…)").

The address is admins-only now (``Device.state_detail``); strip it from messages already stored, so nobody
else sees it before the next poll rewrites them.
"""

from django.db import migrations


def strip_addresses(apps, schema_editor):
    Device = apps.get_model("devices", "Device")
    for device in Device.objects.exclude(state_message="").only("pk", "base_url", "state_message"):
        suffix = f" ({device.base_url})"
        if device.base_url and device.state_message.endswith(suffix):
            Device.objects.filter(pk=device.pk).update(state_message=device.state_message[: -len(suffix)])


class Migration(migrations.Migration):
    dependencies = [("devices", "0002_device_may_evict_summary_model")]

    operations = [migrations.RunPython(strip_addresses, migrations.RunPython.noop)]
