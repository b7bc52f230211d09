"""One verdict vocabulary: a pair's verdict over its tokenizer-class combinations is "compatible", "partial" or
"incompatible", the words of the table's filter, the pages, the API, the CSV and the knowledge base.

Stored verdicts keep their meaning: "all" becomes "compatible", "none" becomes "incompatible", "partial" stays. Two
UPDATEs over the indexed column; the way back restores the old words.
"""

from django.db import migrations, models

FORWARD = {"all": "compatible", "none": "incompatible"}


def forward(apps, schema_editor):
    Pair = apps.get_model("registry", "Pair")
    for old, new in FORWARD.items():
        Pair.objects.filter(verdict=old).update(verdict=new)


def backward(apps, schema_editor):
    Pair = apps.get_model("registry", "Pair")
    for old, new in FORWARD.items():
        Pair.objects.filter(verdict=new).update(verdict=old)


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0027_headline_and_sizes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="pair",
            name="verdict",
            field=models.CharField(default="compatible", max_length=12),
        ),
        migrations.RunPython(forward, backward, elidable=True),
    ]
