"""A "scrape now" is queued for the telemetry worker (the page shows it waiting or running), and scrape errors
stored before keep only their known reason: "not Prometheus text: …" quoted the body of whatever answered."""
import re

from django.db import migrations, models

# registry.team.telemetry's vocabulary of reasons (_REASONS, reason_to_store), copied: a migration does the same
# thing on every database, whatever later versions of that module say.
_REASONS = re.compile(
    "|".join(
        [
            r"connection refused",
            r"timed out",
            r"no complete answer within \d+(?:\.\d+)? s",
            r"host name not found",
            r"could not connect",
            r"connection closed, or not an HTTP answer",
            r"TLS error: the certificate is for another host",
            r"TLS error: certificate not trusted",
            r"TLS error",
            r"HTTP \d{3}(?: \(was llama-server started with --metrics\?\))?",
            r"answer larger than [\d,]+ bytes",
            r"not Prometheus text",
            re.escape("no llamacpp:tokens_predicted_total counter: is this a llama-server /metrics?"),
            re.escape("telemetry unavailable"),
        ]
    )
)


def reason_to_store(error: str) -> str:
    m = _REASONS.search(error or "")
    return m.group(0) if m else "scrape failed"


def trim(apps, schema_editor) -> None:
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
        migrations.RunPython(trim, migrations.RunPython.noop, elidable=True),
    ]
