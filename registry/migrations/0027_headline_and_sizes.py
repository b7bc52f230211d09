"""Headline figures and the evidence of sizes.

A pair's headline figure only when the measurement can tell it from noise; otherwise a note says what it is.

Before, the table and the API headlined the fastest measured result whatever it rested on: one interleaved pair, a
spread reaching 1, a machine other work kept busy. ``best_note`` says what such a figure is, and ``best_speedup`` then
stays empty, so it neither shows nor sorts as a gain. The stored pairs with a measured best are settled here by the
rule as it was written (registry.results.standing), copied so that this migration imports no product code: only the
pairs with a measured figure are read, a few per benchmarked pair.
"""

from django.db import migrations, models

MIN_PAIRS = 2
BUSY_SHARE = 0.10


def _note(r):
    if r["pairs"] is not None and r["pairs"] < MIN_PAIRS:
        return "1 repeat" if r["pairs"] == 1 else f"{r['pairs']} repeats"
    if r["other_cpu_share"] is not None and r["other_cpu_share"] > BUSY_SHARE:
        return "contended"
    if r["speedup_min"] is not None and r["speedup_max"] is not None and r["speedup_min"] <= 1.0 <= r["speedup_max"]:
        return "no measurable gain"
    return ""


def _described(note, speedup):
    if note == "contended":
        return f"contended: {speedup:.2f}× while other work took the CPU"
    if note == "no measurable gain":
        return f"no measurable gain: {speedup:.2f}× within its spread"
    return f"no measurable gain: {speedup:.2f}× in {note}"


def forward(apps, schema_editor):
    Pair = apps.get_model("registry", "Pair")
    Result = apps.get_model("registry", "BenchmarkResult")
    fields = ("k", "speedup", "acceptance", "content_type", "method", "speedup_min", "speedup_max", "pairs",
              "other_cpu_share")  # fmt: skip
    for pk in Pair.objects.filter(best_kind="measured").values_list("pk", flat=True).iterator():
        results = list(Result.objects.filter(pair_id=pk, status="ok").exclude(speedup=None).values(*fields))
        if not results:
            continue
        for r in results:
            r["note"] = _note(r)
        pool = [r for r in results if not r["note"]] or results
        b = max(pool, key=lambda r: (r["speedup"], r["acceptance"] or 0))
        Pair.objects.filter(pk=pk).update(
            best_speedup=None if b["note"] else b["speedup"],
            best_note=_described(b["note"], b["speedup"]) if b["note"] else "",
            best_k=b["k"],
            best_acceptance=b["acceptance"],
            best_content_type=b["content_type"],
            best_method=b["method"],
        )


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0026_state_kinds"),
    ]

    operations = [
        migrations.AddField(
            model_name="pair",
            name="best_note",
            field=models.CharField(blank=True, default="", max_length=80),
        ),
        migrations.RunPython(forward, migrations.RunPython.noop, elidable=True),
        # What a base model's size rests on (registry.catalog.sizes); "" until its next file or
        # ``recheck_pairs --sizes`` sizes it again by the levels of evidence.
        migrations.AddField(
            model_name="basemodel",
            name="size_evidence",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
    ]
