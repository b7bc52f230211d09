"""A run of the target alone (n-gram methods, its own MTP heads) reads as one thing: titled as the target alone, a
setting that drafted nothing shown as the target's own speed, K only where a method takes it, a prediction that
drafted where the measurement did not explained, and a finished run without its last progress message."""

from __future__ import annotations

import pytest

from registry.models import BenchmarkResult, BenchmarkRun
from registry.results.figures import refresh_best
from runner.llama.binaries import Build
from runner.management.commands.run_benchmark import format_results
from runner.measure.cli import Cell, CellResult, Spread
from runner.prompts import load_task_set
from runner.sweep.report import markdown_report
from runner.sweep.sweep import SweepConfig, SweepResult, recommend
from tests.runs import N_MATCH, alone_run

pytestmark = pytest.mark.db_service  # CI runs these again on PostgreSQL


@pytest.fixture
def alone(db, smollm2_path) -> BenchmarkRun:
    return alone_run(smollm2_path)


def test_a_run_of_the_target_alone_is_titled_so_never_as_drafting_for_itself(client, alone):
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "</code> alone (n-gram)" in page
    assert "drafting for" not in page


def test_a_run_of_the_targets_own_mtp_heads_is_titled_so(client, alone):
    BenchmarkRun.objects.filter(pk=alone.pk).update(params={**alone.params, "methods": ["draft-mtp"]})
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "</code> alone (own MTP heads)" in page and "drafting for" not in page


def test_a_setting_that_drafted_nothing_reads_as_the_targets_own_speed(client, alone):
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "101.9 t/s is the target's own speed" in page
    assert "nothing drafted: the n-gram table found no match in these prompts" in page
    # no second speed and no "speculation did not run" beside it
    assert "177.5" not in page and "speculation did not run" not in page


def test_the_command_line_shows_the_same_setting_the_same_way(alone):
    row = next(line for line in format_results(alone).splitlines() if line.startswith("prose "))
    assert "nothing drafted: the n-gram table found no match in these prompts" in row
    assert "the target's own speed" in row and "101.9" in row
    assert "177.5" not in row and "n/a" not in row and "speculation did not run" not in row
    assert "  predicted 24 drafted, measured 0: the prediction replays the target's plain greedy text" in (
        format_results(alone)
    )


def test_k_is_listed_only_for_methods_that_take_it(client, alone):
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "K 4, 8, 16" not in page and "own draft length" in page
    mixed = {**alone.params, "target_alone": False, "methods": ["draft-simple", "ngram-mod"]}
    BenchmarkRun.objects.filter(pk=alone.pk).update(params=mixed)
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "K 4, 8, 16" in page and "the n-gram methods ignore K" in page


def test_a_recommendation_names_its_method_and_a_run_alone_never_had_a_draft_to_leave_out(client, alone):
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "use ngram-simple K=16 ngram-simple-size-n=12 (2.60× faster)" in page and "use K=16" not in page
    assert "run without speculation" in page and "run without a draft" not in page


def test_a_prediction_that_drafted_where_the_measurement_did_not_is_explained(client, alone):
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "Predicted 24 drafted (24 accepted), measured 0:" in page
    why = page.split("Predicted 24 drafted", 1)[1].split("</tr>", 1)[0]
    assert "the target&#x27;s plain greedy text (its transcript)" in why and "parted from it at character 45" in why
    assert "near-tie" in why


def test_a_finished_run_shows_how_long_it_took_not_its_last_progress_message(client, alone):
    page = client.get(f"/runs/{alone.pk}/").content.decode()
    assert "spec run 2/2" not in page and 'id="run-progress"' not in page
    assert 'id="run-finished"' in page and "after 75 s" in page


def test_the_pair_pages_measured_table_names_each_figures_method(client, alone):
    refresh_best(alone.pair)
    BenchmarkResult.objects.filter(run=alone).update(speculation_ran=True, drafted=10, speedup=1.1, acceptance=0.5)
    page = client.get(alone.pair.get_absolute_url()).content.decode()
    table = page.split('class="plain figures"', 1)[1].split("</table>", 1)[0]
    assert "<th>Method</th>" in table and ">ngram-mod " in table and "length 16" in table
    assert "K (draft tokens per step)" not in page  # no plot against K of a method that ignores it


def test_the_pair_pages_list_of_runs_gives_k_only_to_runs_whose_methods_take_it(client, alone):
    runs = client.get(alone.pair.get_absolute_url()).content.decode().split('class="runs"', 1)[1].split("</table>")[0]
    assert "4, 8, 16" not in runs and "n-gram methods ignore K" in runs


def test_the_markdown_report_of_a_run_alone_says_so_and_shows_one_speed():
    """The report a run page links to: titled as the target alone, and the setting that drafted nothing as the
    target's own speed (a sweep's data, as runner.sweep.sweep returns it; no llama.cpp needed to write it)."""
    cell = Cell("t.gguf", "", 16, ("p",), content_type="code", method="ngram-mod", options=(tuple(N_MATCH[0]),))
    nothing = CellResult(
        cell, "ok", None, Spread(101.9, 101.9, 101.9, 1), Spread(177.5, 177.5, 177.5, 1), None, False, 0, 0, None,
        None, True, (), 1.0, 1.0, 1.0,
    )  # fmt: skip
    config = SweepConfig("t.gguf", "", load_task_set(), methods=("ngram-mod",))
    result = SweepResult(config, "ok", None, (nothing,), (recommend("code", 0.0, [nothing]),))
    build = Build("11434", 11434, "abc1234", "gcc", "x86_64", "/bin")
    report = markdown_report(result, hardware={}, build=build)
    assert report.startswith("# Speculative decoding benchmark: t.gguf alone (n-gram)\n")
    row = next(line for line in report.splitlines() if line.startswith("| 16 |"))
    assert "nothing drafted: the n-gram table found no match" in row and "177.5" not in row
