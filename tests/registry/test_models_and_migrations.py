"""The registry's models by domain, its squashed migrations and the run kinds.

A database at the migrations that came before the squashed ones (registry 0029, runner 0005, team 0004, apitokens
0001), with a row in every table, upgrades to the current leaves with every row kept and each run's kind read from the
mode it was submitted with; a fresh database (the test database) migrates through the squashed migrations; the
models and the migrations agree; and no migration imports product code (its behaviour would change with it).
"""

from __future__ import annotations

import ast
import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps as live_apps
from django.core.management import call_command
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

import registry.models
from registry.models import BenchmarkRun

ROOT = Path(__file__).resolve().parents[2]
APPS = ("registry", "runner", "team", "apitokens")
# The leaves before the squashed migrations and the run kinds existed.
OLD_LEAVES = [
    ("registry", "0029_stored_files"),
    ("runner", "0005_kept_transcripts_and_costs"),
    ("team", "0004_deployments_on_their_own_pairs"),
    ("apitokens", "0001_initial"),
]
SQUASHED = [
    ("runner", "0001_initial_squashed_0005_kept_transcripts_and_costs"),
    ("team", "0001_notes_deployments_telemetry_squashed_0003_scrape_queue_and_errors_trimmed"),
]
# The mode a run was submitted with → the kind the upgrade gives it (no mode: a run from before modes, a benchmark).
MODES = {"benchmark": "benchmark", "predict": "predict", "soak": "soak", None: "benchmark"}


def _leaves() -> list[tuple[str, str]]:
    return [n for n in MigrationLoader(connection).graph.leaf_nodes() if n[0] in APPS]


def _schema() -> dict[str, Any]:
    """Every table's columns, indexes and constraints as the database reports them (SQLite's unnamed constraints by
    what they are: their numbers follow the order of the columns)."""
    intro, out = connection.introspection, {}
    with connection.cursor() as c:
        for table in intro.table_names(c):
            if table == "django_migrations":
                continue
            columns = sorted((d.name, str(d.type_code), d.null_ok) for d in intro.get_table_description(c, table))
            constraints = sorted(
                ("" if name.startswith("__unnamed") else name, repr(sorted(v.items())))
                for name, v in intro.get_constraints(c, table).items()
            )
            out[table] = (columns, constraints)
    return out


def _value(field: models.Field) -> Any:
    """A value any column of this type takes (one row per table: uniqueness never bites)."""
    if field.choices:
        return field.choices[0][0]
    by_type: list[tuple[type[models.Field], Any]] = [
        (models.URLField, "https://example.org/x"),
        (models.CharField, "x"),
        (models.TextField, "x"),
        (models.BooleanField, False),
        (models.DateTimeField, dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
        (models.DateField, dt.date(2026, 1, 1)),
        (models.DecimalField, Decimal(1)),
        (models.FloatField, 1.0),
        (models.IntegerField, 1),  # every integer field, big, small and positive alike
        (models.JSONField, {}),
        (models.BinaryField, b"x"),
    ]
    for kind, value in by_type:
        if isinstance(field, kind):
            return value
    raise AssertionError(f"no test value for {field.model.__name__}.{field.name} ({type(field).__name__})")


class Ref:
    """A related row to give a column in ``Rows.extra``: the one row of that model."""

    def __init__(self, label: str) -> None:
        self.label = label


class Rows:
    """One row per model of the historical ``apps``, each made with what its required columns need (a related row
    made first); ``extra`` gives a model's other columns where a constraint asks for them."""

    def __init__(self, apps: Any, extra: dict[str, dict[str, Any]]) -> None:
        self.apps, self.extra = apps, extra
        self.made: dict[str, models.Model] = {}

    def row(self, model: type[models.Model]) -> models.Model:
        label = model._meta.label_lower
        if label not in self.made:
            values: dict[str, Any] = {}
            for f in model._meta.concrete_fields:
                if f.auto_created or isinstance(f, models.AutoField):
                    continue
                if f.is_relation:
                    if not f.null:
                        values[f.name] = self.row(f.related_model)
                elif not (f.null or f.has_default() or getattr(f, "auto_now_add", False)):
                    values[f.name] = _value(f)
            for name, value in self.extra.get(label, {}).items():
                values[name] = self.row(self.apps.get_model(value.label)) if isinstance(value, Ref) else value
            self.made[label] = model.objects.create(**values)
        return self.made[label]


def _rows(apps: Any, extra: dict[str, dict[str, Any]] | None = None) -> Rows:
    """A row in every table of the four apps (and of what they refer to)."""
    rows = Rows(apps, {"team.note": {"pair": Ref("registry.Pair")}, **(extra or {})})  # a note is on one thing
    for model in apps.get_models():
        if model._meta.app_label in APPS:
            rows.row(model)
    return rows


def _fill(apps: Any) -> tuple[dict[str, int], dict[int, str]]:
    """A row in every table, and a run per mode: the rows' ids by model, and the kind each run is to get."""
    rows = _rows(apps, {"registry.benchmarkrun": {"params": {"mode": "benchmark", "ks": [4]}}})
    first = rows.made["registry.benchmarkrun"]
    kinds = {first.pk: "benchmark"}
    for mode, kind in MODES.items():
        params = {} if mode is None else {"mode": mode, "ks": [4]}
        kinds[type(first).objects.create(pair_id=first.pair_id, queue="bench.x", params=params).pk] = kind
    ids = {label: obj.pk for label, obj in rows.made.items() if label.split(".")[0] in APPS}
    return ids, kinds


def _old_path(targets: list[tuple[str, str]]) -> Any:
    """Take the four apps back to no migration, then forward to ``targets`` through the replaced migrations one by
    one (no replacement: what a database of an earlier release ran); the historical models there."""
    MigrationExecutor(connection).migrate([(app, None) for app in APPS])
    old = MigrationExecutor(connection)
    old.loader = MigrationLoader(connection, replace_migrations=False)
    old.migrate(targets)
    return old.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
@pytest.mark.db_service
def test_a_database_at_the_migrations_before_the_squash_upgrades_with_every_row_and_run_kinds():
    leaves = _leaves()
    fresh = _schema()  # the test database: made by the squashed migrations
    try:
        ids, kinds = _fill(_old_path(OLD_LEAVES))
        upgrade = MigrationExecutor(connection)
        # Every replaced migration ran, so the squashed ones count as applied; what is left is the run kinds.
        assert all(s in upgrade.loader.applied_migrations for s in SQUASHED)
        assert [m.name for m, _ in upgrade.migration_plan(leaves)] == ["0030_benchmark_run_kinds"]
        upgrade.migrate(leaves)

        new = MigrationExecutor(connection).loader.project_state(leaves).apps
        assert {m._meta.label_lower for m in new.get_models() if m._meta.app_label in APPS} == set(ids)
        for label, pk in ids.items():
            assert new.get_model(label).objects.filter(pk=pk).exists(), label
        runs = new.get_model("registry", "BenchmarkRun")
        assert dict(runs.objects.values_list("pk", "kind")) == kinds
        assert _schema() == fresh  # the same tables, columns, indexes and constraints either way
    finally:
        MigrationExecutor(connection).migrate(leaves)


# Part of the way through the squashed ranges: the replaced migrations left run, the squashed ones where none ran.
PARTWAY = [
    [("registry", "0001_initial")],  # no runner migration yet: its squashed one still makes the run tables
    [("registry", "0008_provenance_and_verdict_changes"), ("runner", "0004_worker_presence")],
    [("registry", "0020_per_class_verdicts"), ("team", "0003_scrape_queue_and_errors_trimmed")],
]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.db_service
@pytest.mark.parametrize("targets", PARTWAY, ids=lambda t: " ".join(f"{a} {n[:4]}" for a, n in t))
def test_a_database_part_of_the_way_through_upgrades_to_the_same_schema(targets):
    fresh = _schema()
    try:
        _rows(_old_path(targets))  # rows for the remaining data steps to read
        # The leaves as this database's graph has them: a squashed migration where none of those it replaces ran.
        MigrationExecutor(connection).migrate(_leaves())
        assert _schema() == fresh
    finally:
        MigrationExecutor(connection).migrate(_leaves())


@pytest.mark.django_db
def test_a_fresh_database_migrates_through_the_squashed_migrations():
    loader = MigrationLoader(connection)
    applied = MigrationRecorder(connection).applied_migrations()
    assert all(s in applied for s in SQUASHED)
    for replaced in loader.replacements.values():
        assert not any(r in loader.graph.nodes for r in replaced.replaces)  # the squashed migrations stand for them
    assert {loader.replacements[s].replaces[-1] for s in SQUASHED} == {
        ("runner", "0005_kept_transcripts_and_costs"),
        ("team", "0003_scrape_queue_and_errors_trimmed"),
    }
    assert ("registry", "0030_benchmark_run_kinds") in loader.graph.leaf_nodes()
    assert not MigrationExecutor(connection).migration_plan(loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_the_models_and_the_migrations_agree():
    call_command("makemigrations", check=True, dry_run=True, verbosity=0)


def test_no_migration_imports_product_code():
    """A migration that imports the product behaves as the product does today, not as when it was written."""
    product = ("registry", "runner", "inspector")
    paths = sorted(p for package in product for p in (ROOT / package).glob("**/migrations/0*.py"))
    assert len(paths) > 40
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            bad = [n for n in names if n.split(".")[0] in product]
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_every_registry_model_is_named_by_the_package_and_lives_in_a_domain_module():
    ours = list(live_apps.get_app_config("registry").get_models())
    assert {m.__name__ for m in ours} <= set(registry.models.__all__)
    for model in ours:
        assert getattr(registry.models, model.__name__) is model
        assert model.__module__.startswith("registry.models.") and model._meta.app_label == "registry"
    assert BenchmarkRun._meta.db_table == "runner_benchmarkrun"


def test_a_run_s_kind_is_the_mode_it_was_submitted_with():
    for mode, kind in MODES.items():
        assert BenchmarkRun.kind_of({} if mode is None else {"mode": mode}) == kind
    assert BenchmarkRun.kind_of({"mode": "anything else"}) == BenchmarkRun.BENCHMARK
