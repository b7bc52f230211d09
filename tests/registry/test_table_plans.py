"""PostgreSQL's plans for the pairs table at 20,000 pairs: every sort order and page reads an index, never the whole
table.

Plans are PostgreSQL's: when the tests run on SQLite this test runs itself again on the
PostgreSQL at 127.0.0.1:5432 (skipped when there is none, failed under CI).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from registry.catalog.columns import table_columns
from registry.models import GGUFFile, Model, Pair
from registry.sort_keys import COLUMNS
from registry.table.pages import page_of
from registry.table.request import TableQuery
from tests.needs import missing

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

SORTS = [s for name in COLUMNS for s in (f"-{name}", name)]
POSTGRES = ("127.0.0.1", 5432)
ROOT = Path(__file__).resolve().parents[2]


def fill(n_files: int = 200) -> None:
    """n_files files and a pair for every two (19,900), a few with results, as a table the planner takes seriously."""
    rng = random.Random(11)
    now = timezone.now()
    models = Model.objects.bulk_create([Model(repo=f"org/repo-{i}", name=f"model-{i:03d}") for i in range(n_files)])
    files = GGUFFile.objects.bulk_create(
        [
            GGUFFile(
                source=f"hf://org/repo-{i}/m-{i}.gguf",
                repo=f"org/repo-{i}",
                path=f"m-{i}.gguf",
                model=m,
                info={},
                vocab_key="k",
                vocab_type="BPE",
                n_vocab=1000,
                architecture="llama",
                arch_kind="attention",
                parameter_count=rng.randint(1, 100) * 10**8,
                inspected_at=now,
            )
            for i, m in enumerate(models)
        ]
    )
    pairs = []
    for i, t in enumerate(files):
        for d in files[i + 1 :]:
            tested = rng.random() < 0.03
            pairs.append(
                Pair(
                    target=t,
                    draft=d,
                    compatible=rng.random() < 0.9,
                    llama_cpp_compatible=True,
                    rules_from="b1",
                    checked_at=now - timedelta(seconds=rng.randint(0, 10**6)),
                    size_ratio=t.parameter_count / d.parameter_count,
                    best_kind="reported" if tested else "",
                    best_speedup=rng.uniform(0.3, 3) if tested else None,
                    best_k=rng.choice([4, 8, 16]) if tested else None,
                    best_acceptance=rng.uniform(0.3, 0.9) if tested else None,
                    **table_columns(t, d),
                )
            )
    Pair.objects.bulk_create(pairs, batch_size=2000)
    with connection.cursor() as c:
        c.execute("ANALYZE registry_pair")


def plans_of(params: str) -> list[tuple[str, dict]]:
    """The SQL and plan of every query on the pair table that one table request runs."""
    with CaptureQueriesContext(connection) as ctx:
        page, _ = page_of(TableQuery.from_params(QueryDict(params)))
    out = []
    for q in ctx.captured_queries:
        if '"registry_pair"' in q["sql"] and not q["sql"].startswith("EXPLAIN"):
            with connection.cursor() as c:
                c.execute("EXPLAIN (FORMAT JSON) " + q["sql"])
                plan = c.fetchone()[0]
            out.append((q["sql"], plan if isinstance(plan, list) else json.loads(plan)))
    plans_of.last_page = page  # for following links
    return out


def nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def scans_of_pairs(plan: list) -> list[str]:
    """The plan's reads of the pair table and its indexes ("Seq Scan", "Index Scan pairkey_ratio_asc", …)."""
    with connection.cursor() as c:
        c.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'registry_pair'")
        indexes = {r[0] for r in c.fetchall()}
    return [
        f"{n['Node Type']} {n.get('Index Name', '')}".strip()
        for n in nodes(plan[0]["Plan"])
        if n.get("Relation Name") == "registry_pair" or n.get("Index Name") in indexes
    ]


def check_plans() -> None:
    fill()
    failures = []
    for verdict in ("usable", "compatible", "any", "incompatible"):
        for sort in SORTS:
            first = f"verdict={verdict}&sort={sort}"
            for params in (first, None, f"{first}&page=200"):
                if params is None:  # the Next link of the first page: a keyset cursor
                    plans_of(first)
                    params = plans_of.last_page.next_query.lstrip("?")
                for sql, plan in plans_of(params):
                    if " ORDER BY " not in sql:
                        continue  # the bounded count (LIMIT 1001, no order) may stop early in a scan
                    scans = scans_of_pairs(plan)
                    if any(s.startswith("Seq Scan") for s in scans) or not any("Index" in s for s in scans):
                        failures.append(f"{params}: {scans}\n    {sql[:300]}")
    # The search box and the filters: counting the matches (and naming them, when few) reads an
    # index; the page is then read by primary key. At 20,000 pairs a scan of the whole table costs
    # about what the trigram index does, so the planner is told to avoid scans here: what this
    # checks is that the index answers the query's own expression (the benchmark, at 100,000
    # pairs, prints the plans PostgreSQL chooses by itself).
    with connection.cursor() as c:
        c.execute("SET LOCAL enable_seqscan = off")
    for params, index in [
        ("q=repo-17/", "pair_search_trgm"),
        ("q=repo-18/&sort=-checked", "pair_search_trgm"),
        ("q=model-01", "pair_search_trgm"),
        ("min_speedup=2.5", "pairkey_speedup_desc"),
    ]:
        for i, (sql, plan) in enumerate(plans_of(params)):
            scans = scans_of_pairs(plan)
            want = index if i == 0 else ""  # then the page: by primary key when few match, else a sort key
            if any(s.startswith("Seq Scan") for s in scans) or not any(want in s and "Index" in s for s in scans):
                failures.append(f"{params}: {scans} (wanted {want or 'an index'})\n    {sql[:300]}")
    with connection.cursor() as c:
        c.execute("SET LOCAL enable_seqscan = on")
    assert not failures, "plans reading the whole pair table or no index:\n" + "\n".join(failures)


def postgres_reachable() -> bool:
    try:
        with socket.create_connection(POSTGRES, timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_every_sort_order_page_and_search_reads_an_index_on_postgresql(tmp_path):
    if connection.vendor == "postgresql":
        check_plans()
        return
    if not postgres_reachable():
        missing("PostgreSQL at 127.0.0.1:5432 (this test checks its query plans)")
    name = f"specreg_plans_{os.getpid()}"
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://postgres@{POSTGRES[0]}:{POSTGRES[1]}/{name}",
        TEST_DATABASE_NAME=f"test_{name}",
        SPECREG_DATA_DIR=str(tmp_path),
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"{__file__}::{test_every_sort_order_page_and_search_reads_an_index_on_postgresql.__name__}",
            "-q",
            "-p",
            "no:cacheprovider",
            "--create-db",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
