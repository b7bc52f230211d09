"""A "scrape now" is queued for the telemetry worker (the page shows it waiting or running), and scrape errors
stored before keep only their known reason: "not Prometheus text: …" quoted the body of whatever answered."""
from django.db import migrations, models


def trim(apps, schema_editor) -> None:
    # The vocabulary of the day (registry.team.telemetry): what a row keeps is what record() stores now.
    from registry.team.telemetry import reason_to_store

    sample = apps.get_model("team", "TelemetrySample")
    for pk, error in sample.objects.filter(ok=False).values_list("pk", "error").iterator():
        kept = reason_to_store(error)
        if kept != error:
            sample.objects.filter(pk=pk).update(error=kept)


class Migration(migrations.Migration):

    dependencies = [("team", "0002_scrape_errors_without_url")]

    operations = [
        migrations.AddField(model_name="deployment", name="scrape_queued_at",
                            field=models.DateTimeField(blank=True, null=True)),
        migrations.AddField(model_name="deployment", name="scrape_started_at",
                            field=models.DateTimeField(blank=True, null=True)),
        migrations.RunPython(trim, migrations.RunPython.noop),
    ]
