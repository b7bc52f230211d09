from django.db import migrations, models
from django.db.models import Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Left


def fill(apps, schema_editor):
    """Every registered file's method, from its stored inspection (one UPDATE, on SQLite and PostgreSQL alike), cut
    to the column's length as registration cuts it (an inspection imported from a knowledge base is not trusted)."""
    GGUFFile = apps.get_model("registry", "GGUFFile")
    method = Coalesce(KeyTextTransform("speculative_type", "info"), Value(""))
    GGUFFile.objects.update(speculative_type=Left(method, 32))


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0023_pair_with_figures_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="gguffile",
            name="speculative_type",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=True),
    ]
