"""Knowledge bases between installations: installation A's records (real models, runs under two builds, a reported
figure, team notes and a deployment), its export, an empty installation B, and what pages show of them (a pytest
plugin: tests/conftest.py names it)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from inspector.info import ModelInfo
from registry.catalog.pairing import pair_for
from registry.kb.export import knowledge_base
from registry.models import (
    BenchmarkResult,
    BenchmarkRun,
    Family,
    GGUFFile,
    Model,
    Pair,
    PairCheckResult,
    PredictedResult,
    ReportedResult,
    TokenTable,
)
from registry.results.figures import refresh_best, refresh_predicted
from tests.registering import reg

HERE = "installation-a"


COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def installation_a(settings: Settings) -> Settings:
    settings.SPECREG_INSTALLATION_ID = HERE
    return settings


@pytest.fixture
def kb_a(infos: dict[str, ModelInfo]) -> Pair:
    """Installation A: three real models, the Qwen pair benchmarked under two builds, a reported figure,
    and a pair a user asked for (SmolLM2 for Qwen 1.5B, incompatible)."""
    q05, q15, smol = (
        reg(infos["qwen05"], "org/qwen05", "qwen05.gguf", commit=COMMIT, size=1),
        reg(infos["qwen15"], "org/qwen15", "qwen15.gguf", commit=COMMIT, size=1),
        reg(infos["smollm2"], "org/smollm2", "smollm2.gguf", commit=COMMIT, size=1),
    )
    reg(infos["gemma3"], "org/gemma3", "gemma3.gguf", commit=COMMIT, size=1)
    pair = Pair.objects.get(target=q15, draft=q05)
    pair_for(q15, smol)
    alice = User.objects.create_user("alice", password="x" * 12)
    for i, (build, tps, speedup) in enumerate([("b11000", 11.4, 0.48), ("b11434 (abc1234)", 14.0, 0.62)]):
        run = BenchmarkRun.objects.create(
            pair=pair,
            queue="bench.cpu-2c",
            status="done",
            hardware_class="cpu-2c",
            requested_by=alice,
            build={"label": build},
            summary={"status": "done"},
            server_command="llama-server -m models/qwen15.gguf",
            hardware={"cpus": 2},
        )
        BenchmarkRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=2 - i))
        for k in (4, 8):
            BenchmarkResult.objects.create(
                run=run,
                pair=pair,
                k=k,
                content_type="code",
                n_predict=64,
                repeats=3,
                n_prompts=2,
                status="ok",
                tokens_per_second=tps + k / 10,
                tps_min=tps - 0.3,
                tps_max=tps + 0.9,
                speedup=speedup + k / 100,
                baseline_tokens_per_second=23.8,
                acceptance=0.7,
                drafted=100,
                accepted=70,
                identical=True,
                divergences=[{"prompt": 0, "position": None}],
                hardware="Some CPU (cpu-2c)",
                llama_cpp_build=build,
            )
    PredictedResult.objects.create(
        run=run,
        pair=pair,
        k=4,
        method="draft-simple",
        p_min=0.0,
        content_type="code",
        acceptance=0.72,
        speedup=0.7,
        n_predict=64,
        n_prompts=2,
        task_set="default",
        hardware_class="cpu-2c/avx2",
        hardware="Some CPU (cpu-2c/avx2)",
        llama_cpp_build="b11434 (abc1234)",
        drafted=100,
        accepted=72,
        tokens=128,
        near_ties=3,
    )
    refresh_predicted(pair)
    BenchmarkRun.objects.create(pair=pair, queue="bench.cpu-2c", status="queued")  # in progress: not exported
    ReportedResult.objects.create(
        pair=pair,
        k=24,
        speedup=1.9,
        acceptance=0.8,
        content_type="code",
        citation="llama.cpp PR 10455",
        source_url="https://github.com/ggml-org/llama.cpp/pull/10455",
        reported_by=alice,
        hardware="M2 Ultra",
        llama_cpp_build="b4182",
    )
    refresh_best(pair)
    team_records(pair, run, alice)
    return pair


def team_records(pair: Pair, run: BenchmarkRun, alice: User) -> None:
    """Notes (one edited, one on a run, one hidden) and a deployment with observed traffic."""
    from registry.team.models import Deployment
    from registry.team.notes import add_note, edit_note, set_hidden
    from registry.team.telemetry import record

    note = add_note(pair, "K=8 **held** in CI", alice)
    edit_note(note, "K=8 **held** in CI and in production", alice)
    add_note(run, "ran on the *old* box", alice)
    staff = User.objects.create_user("root", password="x" * 12, is_staff=True)
    set_hidden(add_note(pair.target.model, "spam <script>x</script>", alice), True, staff)
    d = Deployment.objects.create(
        target=pair.target,
        draft=pair.draft,
        pair=pair,
        run=run,
        method="draft-simple",
        k=8,
        command="llama-server -m models/qwen15.gguf -md models/qwen05.gguf",
        host="gpu-7",
        url="http://10.0.0.7:8080",
        created_by=alice,
        author_name="alice",
        deployed_at=timezone.now() - timedelta(days=3),
    )
    t0 = timezone.now() - timedelta(hours=1)
    record(
        d,
        counters={
            "draft_tokens": 100,
            "accepted_tokens": 60,
            "drafts": 25,
            "tokens_predicted": 300,
            "tokens_predicted_seconds": 10,
        },
        at=t0,
    )
    record(d, counters=None, error="connection refused", at=t0 + timedelta(minutes=5))
    record(
        d,
        counters={
            "draft_tokens": 500,
            "accepted_tokens": 380,
            "drafts": 120,
            "tokens_predicted": 1300,
            "tokens_predicted_seconds": 40,
        },
        at=t0 + timedelta(minutes=10),
    )


def team_of() -> dict:
    """The team's records as pages show them, without what differs by installation (ids, URLs)."""
    from registry.team.models import Deployment, Note
    from registry.team.telemetry import observed

    def subject(n) -> str:  # what the note is on, by names rather than ids
        if n.run_id:
            return f"run of {n.run.pair} started {n.run.created_at.isoformat()}"
        return f"model {n.model.repo}/{n.model.name}" if n.model_id else str(n.subject)

    notes = sorted(
        [n.body, subject(n), n.author_name, n.hidden, [v.body for v in n.versions.all()]] for n in Note.objects.all()
    )
    deployments = [
        {
            "target": d.target.source,
            "draft": d.draft.source if d.draft else None,
            "method": d.method,
            "k": d.k,
            "command": d.command,
            "host": d.host,
            "author": d.author_name,
            "deployed_at": d.deployed_at.isoformat(),
            "run": bool(d.run_id),
            "observed": observed(d).to_dict(),
        }
        for d in Deployment.objects.order_by("deployed_at")
    ]
    return {"notes": notes, "deployments": deployments}


def counts() -> dict[str, int]:
    from registry.team.models import Deployment, Note, NoteVersion, TelemetrySample

    return {
        m.__name__: m.objects.count()
        for m in (
            GGUFFile,
            TokenTable,
            Model,
            Family,
            Pair,
            PairCheckResult,
            BenchmarkRun,
            BenchmarkResult,
            PredictedResult,
            ReportedResult,
            Note,
            NoteVersion,
            Deployment,
            TelemetrySample,
        )
    }


def empty_installation(settings: Settings, name: str) -> None:
    """This test database becomes another, empty installation."""
    from registry.models import BaseModel, TokenizerClass
    from registry.team.models import Deployment

    for m in (
        Deployment,
        BenchmarkRun,
        ReportedResult,
        Pair,
        GGUFFile,
        Model,
        BaseModel,
        Family,
        TokenizerClass,
        TokenTable,
    ):
        m.objects.all().delete()
    settings.SPECREG_INSTALLATION_ID = name


def table_of(c: Client) -> dict:
    """The pairs table (JSON and HTML) and every pair's page, as the client ``c`` sees them."""
    streamed = c.get("/api/pairs?all=1&verdict=all")
    rows = json.loads(b"".join(streamed.streaming_content))["results"]
    pages = {r["draft"]["source"] + " > " + r["target"]["source"]: c.get(f"/api/pairs/{r['id']}").json() for r in rows}
    return {"rows": rows, "pages": pages, "html": c.get("/?verdict=all").content.decode()}


def a_doc(kb_a: Pair) -> dict:
    """Installation A's export (``kb_a``: its records are made) as a file carries it."""
    return json.loads(json.dumps(knowledge_base()))


def large_kb(doc: dict, path: Path, megabytes: float, *, shape: str = "summaries") -> int:
    """``doc`` with benchmark runs added until the file is about ``megabytes`` long, returning how many.

    shape "summaries": each run's summary holds 600 small per-cell records (the many small objects that
    made the old import take many times the file in memory; stored with the run, read back by nothing
    the import does). "divergences": each run has 4 results with 250 divergences each, which the pair's
    best-result refresh at the end reads back all at once (registry.results.figures.figures_for).
    Written as it is produced (every run shares one summary or results list), so this process stays small."""
    run = next(r for r in doc["runs"] if r["results"])
    if shape == "divergences":
        extra = {
            "results": [
                {**run["results"][0], "k": k, "divergences": [{"prompt": i % 7, "position": i} for i in range(250)]}
                for k in (2, 4, 8, 16)
            ]
        }
    else:
        extra = {
            "summary": {
                "cells": [{"k": 1 + i % 16, "prompt": i % 50, "tps": 10.5 + i % 9, "accepted": i} for i in range(600)]
            }
        }
    per_run = len(json.dumps({**run, **extra}))
    n = int(megabytes * 1e6 / per_run)
    base = max(r["id"] for r in doc["runs"])
    head = json.dumps({**doc, "runs": []})
    cut = head.index('"runs": []') + len('"runs": [')
    with open(path, "w") as out:
        out.write(head[:cut])
        for row in doc["runs"]:
            out.write(json.dumps(row) + ",")
        for i in range(n):
            out.write(("," if i else "") + json.dumps({**run, "id": base + 1 + i, **extra}))
        out.write(head[cut:])
    return n
