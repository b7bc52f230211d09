"""Token types beside token texts, and per file pair adaptability.

Schema only: every existing row stays as it is. Files registered before have no stored types
(``GGUFFile.token_types`` null), and their adaptability reads "cannot tell" until they are registered anew
(registry.models.TokenTypeTable says how); nothing here reads a file.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0020_per_class_verdicts"),
    ]

    operations = [
        migrations.CreateModel(
            name="TokenTypeTable",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("sha256", models.CharField(max_length=64, unique=True)),
                ("count", models.PositiveIntegerField()),
                ("blob", models.BinaryField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name="gguffile",
            name="token_types",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="files",
                to="registry.tokentypetable",
            ),
        ),
        migrations.CreateModel(
            name="AdaptCheck",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "state",
                    models.CharField(
                        choices=[("adaptable", "adaptable"), ("refused", "refused"), ("unknown", "unknown")],
                        max_length=16,
                    ),
                ),
                ("rule", models.CharField(blank=True, max_length=32)),
                ("detail", models.TextField(blank=True)),
                ("plan", models.JSONField(blank=True, null=True)),
                ("version", models.CharField(max_length=64)),
                ("decided_at", models.DateTimeField()),
                (
                    "draft",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="registry.gguffile"
                    ),
                ),
                (
                    "target",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="registry.gguffile"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("target", "draft"), name="adaptcheck_target_draft_unique")
                ],
            },
        ),
    ]
