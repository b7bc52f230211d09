"""Recurrent, hybrid and memory-less models under llama.cpp b11434's rules: stored files and pairs brought up to date.

Earlier rules refused every pair with a recurrent or hybrid side and called memory-less encoders (the BERT family)
attention models. b11434 speculates with recurrent and hybrid models (checkpoints or bounded rollback) and never with
a model without memory. This migration imports no product code: the lists are copied here as they were when it was
written (llama.cpp b11434's create_memory and llm_arch_is_recurrent/_hybrid). It changes only columns:

- memory-less files get arch_kind "no-memory";
- recurrent and hybrid files with a token table and no method get the ordinary draft method, "draft-simple";
- every pair with such a side gets "+stale" after its rules_from: its verdict is the old one until
  ``manage.py recheck_pairs --stale`` decides it again and records each change with its reason.

Each is one UPDATE over an indexed or small set of rows, so an upgrade does not stall on a large registry.
"""

from django.db import migrations, models
from django.db.models import Q, Value
from django.db.models.functions import Concat

NO_MEMORY = [
    "bert",
    "jina-bert-v2",
    "jina-bert-v3",
    "nomic-bert",
    "nomic-bert-moe",
    "neo-bert",
    "eurobert",
    "wavtokenizer-dec",
    "modern-bert",
    "gemma-embedding",
    "clef",
]
STATEFUL = ["recurrent", "hybrid"]
STALE = "+stale"


def forward(apps, schema_editor):
    GGUFFile = apps.get_model("registry", "GGUFFile")
    Pair = apps.get_model("registry", "Pair")
    GGUFFile.objects.filter(architecture__in=NO_MEMORY).update(arch_kind="no-memory")
    GGUFFile.objects.filter(arch_kind__in=STATEFUL, speculative_type="", token_table__isnull=False).update(
        speculative_type="draft-simple"
    )
    moved = STATEFUL + ["no-memory"]
    Pair.objects.filter(Q(target__arch_kind__in=moved) | Q(draft__arch_kind__in=moved)).exclude(
        rules_from__endswith=STALE
    ).update(rules_from=Concat("rules_from", Value(STALE), output_field=models.CharField()))


def backward(apps, schema_editor):
    GGUFFile = apps.get_model("registry", "GGUFFile")
    GGUFFile.objects.filter(arch_kind="no-memory").update(arch_kind="transformer")
    GGUFFile.objects.filter(arch_kind__in=STATEFUL, speculative_type="draft-simple").update(speculative_type="")


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0025_pair_fewer_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="verdictchange",
            name="new_state",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.AddField(
            model_name="verdictchange",
            name="reason",
            field=models.CharField(blank=True, default="", max_length=300),
        ),
        migrations.RunPython(forward, backward, elidable=True),
    ]
