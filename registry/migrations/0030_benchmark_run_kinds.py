"""A run's kind as a column: benchmark, predict or soak, filled from the mode each existing run was submitted with
(``params["mode"]``, which stays as submitted). A run whose params name no mode was a benchmark."""

from django.db import migrations, models

KINDS = ("predict", "soak")


def fill(apps, schema_editor):
    BenchmarkRun = apps.get_model("registry", "BenchmarkRun")
    for kind in KINDS:
        BenchmarkRun.objects.filter(params__mode=kind).update(kind=kind)


class Migration(migrations.Migration):

    dependencies = [
        ("registry", "0029_stored_files"),
    ]

    operations = [
        migrations.AddField(
            model_name="benchmarkrun",
            name="kind",
            field=models.CharField(
                choices=[("benchmark", "benchmark"), ("predict", "predict"), ("soak", "soak")],
                db_index=True,
                default="benchmark",
                max_length=16,
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=True),
    ]
