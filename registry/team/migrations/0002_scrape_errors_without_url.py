"""Scrape errors stored before they were kept free of the server's address began with it ("http://host:port/metrics:
connection refused"); they are shown to everyone, the URL only to signed-in users, so the address goes."""
from django.db import migrations
from django.db.models import Value
from django.db.models.functions import StrIndex, Substr


def scrub(apps, schema_editor) -> None:
    sample = apps.get_model("team", "TelemetrySample")
    gaps = sample.objects.filter(ok=False)
    # Every message fetch() wrote started with the URL and ": "; a URL holds no space, so the first ": " ends it.
    (gaps.filter(error__regex=r"^https?://\S*: ")
     .update(error=Substr("error", StrIndex("error", Value(": ")) + 2)))
    # urllib3's name-resolution message repeats the host name.
    gaps.filter(error__startswith="Failed to resolve").update(error="host name not found")


class Migration(migrations.Migration):

    dependencies = [("team", "0001_notes_deployments_telemetry")]

    operations = [migrations.RunPython(scrub, migrations.RunPython.noop, elidable=True)]
