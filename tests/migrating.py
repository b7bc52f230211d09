"""Taking the test database back to a migration the squashed ones replace, as a registry of that release stood.

The squashed migrations carry no data steps (a new database has no rows to move); the replaced ones still do, for a
registry that stopped partway. A test of such a step goes back through the replaced migrations one by one:
Django's executor cannot go back to a replaced migration while the squashed one counts as applied, so the squashed
records are dropped first (``migrate`` records them again once every migration they replace has run)."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder


def leaves() -> list[tuple[str, str]]:
    """Every app's newest migration, as a new database has them."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def rewind(targets: list[tuple[str, str]]) -> MigrationExecutor:
    """Unapply back to ``targets`` through the replaced migrations; the executor returned knows them (its loader's
    ``project_state(targets).apps`` gives the historical models there)."""
    unreplaced = MigrationLoader(connection, replace_migrations=False)
    squashed = {key for key, m in unreplaced.disk_migrations.items() if m.replaces}
    # First back to each target app's newest squashed migration: what came after it (the run kinds) is unapplied
    # while the squashed one still counts, so the way forward again runs it too.
    apps = {app for app, _ in targets}
    newest = [max(k for k in squashed if k[0] == app) for app in apps if any(k[0] == app for k in squashed)]
    MigrationExecutor(connection).migrate(newest)
    recorder = MigrationRecorder(connection)
    for app, name in squashed:
        recorder.record_unapplied(app, name)
    executor = MigrationExecutor(connection)
    executor.loader = MigrationLoader(connection, replace_migrations=False)
    executor.migrate(targets)
    return executor
