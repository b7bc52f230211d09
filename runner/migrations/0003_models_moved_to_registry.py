"""BenchmarkRun and BenchmarkResult moved to the registry app; their tables stay where they are."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("runner", "0002_other_cpu_share"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="BenchmarkResult"),
                migrations.DeleteModel(name="BenchmarkRun"),
            ],
            database_operations=[],
        ),
    ]
