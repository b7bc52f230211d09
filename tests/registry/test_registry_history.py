"""History across llama.cpp builds (results kept per build, changes beyond the spreads) and recheck_pairs."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from registry.catalog.pairing import pair_for
from registry.models import BenchmarkResult, Pair, VerdictChange
from registry.results.figures import refresh_best
from registry.results.history import build_changes, build_number
from tests.registering import reg
from tests.runs import finished_run

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


@pytest.fixture
def qwen_pair(infos):
    reg(infos["qwen05"], "org/qwen05", "qwen05.gguf", size=1)
    reg(infos["qwen15"], "org/qwen15", "qwen15.gguf", size=1)
    return Pair.objects.get()


def test_build_numbers_order_builds_numerically():
    assert build_number("b11434 (abc1234)") == 11434 and build_number("b9999") == 9999
    assert build_number("4589 (abc)") is None and build_number("") is None


def test_a_newer_build_keeps_the_older_figures_and_the_pair_page_shows_only_changes_beyond_the_spreads(
    client, qwen_pair
):
    # b9999 was measured after b11434 (a re-test of an old build): builds are ordered by number, not by
    # when they ran, and not as text ("b9999" > "b11434").
    finished_run(
        qwen_pair,
        "b11434 (abc1234)",
        "cpu-2c",
        [("code", 4, 14.0, 13.5, 14.4, 0.62), ("prose", 4, 10.5, 9.5, 11.2, 0.45)],
        minutes_ago=60,
    )
    finished_run(
        qwen_pair,
        "b9999 (0123abc)",
        "cpu-2c",
        [("code", 4, 11.4, 11.0, 11.9, 0.48), ("prose", 4, 10.0, 9.0, 11.0, 0.43)],
        minutes_ago=10,
    )
    finished_run(
        qwen_pair, "b9999 (0123abc)", "gpu-nvidia-h100", [("code", 4, 200.0, 190.0, 210.0, 1.9)], minutes_ago=5
    )
    refresh_best(qwen_pair)

    # Nothing replaced: both builds' rows are there and the best is chosen over all of them.
    assert BenchmarkResult.objects.filter(pair=qwen_pair).count() == 5
    qwen_pair.refresh_from_db()
    assert qwen_pair.best_speedup == 1.9

    changes = build_changes(qwen_pair.pk)
    assert len(changes) == 1  # prose overlaps (9.0–11.0 and 9.5–11.2); the GPU has one build only
    c = changes[0]
    assert (c.old_build, c.new_build, c.content_type, c.hardware_class, c.method) == (
        "b9999 (0123abc)",
        "b11434 (abc1234)",
        "code",
        "cpu-2c",
        "draft-simple",
    )
    assert c.direction == "faster" and c.percent == pytest.approx(100 * (14.0 / 11.4 - 1))

    data = client.get(f"/api/pairs/{qwen_pair.pk}").json()
    assert [(b["direction"], round(b["percent"])) for b in data["build_changes"]] == [("faster", 23)]
    assert len(data["measured"]) == 5
    html = client.get(qwen_pair.get_absolute_url()).content.decode()
    assert 'id="build-changes"' in html
    assert "b11434 (abc1234) is 23% faster than b9999 (0123abc)" in html and "11.4 → 14.0 tokens/s" in html


def test_a_slower_newer_build_is_shown_as_slower(qwen_pair):
    finished_run(qwen_pair, "b11000", "cpu-2c", [("code", 8, 12.0, 11.8, 12.3, 0.5)], minutes_ago=30)
    finished_run(qwen_pair, "b11434", "cpu-2c", [("code", 8, 9.0, 8.7, 9.4, 0.38)], minutes_ago=20)
    (c,) = build_changes(qwen_pair.pk)
    assert c.direction == "slower" and c.percent == pytest.approx(-25) and "25% slower" in c.sentence


def test_no_change_is_claimed_within_the_spreads_or_across_k(qwen_pair):
    finished_run(qwen_pair, "b11000", "cpu-2c", [("code", 4, 12.0, 10.0, 13.0, 0.5)], minutes_ago=30)
    finished_run(
        qwen_pair,
        "b11434",
        "cpu-2c",
        [("code", 4, 12.9, 12.5, 13.4, 0.52), ("code", 16, 30.0, 29, 31, 1.2)],
        minutes_ago=20,
    )
    assert build_changes(qwen_pair.pk) == []


def test_recheck_pairs_lists_and_stores_the_verdicts_the_pinned_rules_change(infos):
    qwen05, qwen15 = (
        reg(infos["qwen05"], "org/qwen05", "qwen05.gguf", size=1),
        reg(infos["qwen15"], "org/qwen15", "qwen15.gguf", size=1),
    )
    smol = reg(infos["smollm2"], "org/smollm2", "smollm2.gguf", size=1)
    pair = Pair.objects.get(target=qwen15, draft=qwen05)
    odd = pair_for(qwen15, smol)  # asked for by a user: SmolLM2's 49,152 tokens cannot draft for Qwen's 151,936
    assert pair.compatible and not odd.compatible and odd.failed_rule == "vocab_size"

    # Verdicts as an installation pinned to older rules stored them: the Qwen pair refused, the other allowed.
    Pair.objects.filter(pk=pair.pk).update(compatible=False, failed_rule="vocab_size", rules_from="b4000")
    Pair.objects.filter(pk=odd.pk).update(compatible=True, failed_rule="", rules_from="b4000")
    stored_rule = Pair.objects.get(pk=odd.pk)

    dry = []
    call_command("recheck_pairs", "--dry-run", stdout=_Lines(dry))
    assert VerdictChange.objects.count() == 0 and not Pair.objects.get(pk=pair.pk).compatible
    assert dry[-1].startswith("2 pairs checked with the rules of llama.cpp b11434; 2 verdicts changed (dry run")

    out = []
    call_command("recheck_pairs", stdout=_Lines(out))
    assert len(out) == 3 and out[-1] == "2 pairs checked with the rules of llama.cpp b11434; 2 verdicts changed"
    assert (
        f"pair {pair.pk}: hf://org/qwen05/qwen05.gguf drafting for hf://org/qwen15/qwen15.gguf: "
        "incompatible (vocab_size) under b4000 → compatible under b11434" in out
    )
    assert any(line.startswith(f"pair {odd.pk}: ") and "compatible under b4000 → incompatible" in line for line in out)
    pair.refresh_from_db(), odd.refresh_from_db()
    assert pair.compatible and pair.rules_from == "b11434" and pair.failed_rule == ""
    assert not odd.compatible and odd.failed_rule == "vocab_size" and odd.result["failed_rule"] == odd.failed_rule
    assert odd.checked_at > stored_rule.checked_at
    changes = {v.pair_id: v for v in VerdictChange.objects.all()}
    assert set(changes) == {pair.pk, odd.pk} and changes[pair.pk].old_rules_from == "b4000"
    assert changes[odd.pk].new_failed_rule == odd.failed_rule

    # Checked again with the same rules: nothing changes, nothing more is stored.
    again = []
    call_command("recheck_pairs", "--json", stdout=_Lines(again))
    data = json.loads("\n".join(again))
    assert data["checked"] == 2 and data["changed"] == [] and VerdictChange.objects.count() == 2


def test_the_pair_page_lists_its_verdict_changes(client, infos):
    reg(infos["qwen05"], "org/qwen05", "qwen05.gguf", size=1)
    reg(infos["qwen15"], "org/qwen15", "qwen15.gguf", size=1)
    pair = Pair.objects.get()
    Pair.objects.filter(pk=pair.pk).update(compatible=False, failed_rule="token_text", rules_from="b4000")
    call_command("recheck_pairs", stdout=_Lines([]))
    html = client.get(pair.get_absolute_url()).content.decode()
    assert 'id="verdict-changes"' in html and "incompatible (token_text) under the rules of b4000" in html
    data = client.get(f"/api/pairs/{pair.pk}").json()
    assert (
        data["verdict_changes"][0]["old_failed_rule"] == "token_text" and data["verdict_changes"][0]["new_compatible"]
    )


class _Lines:
    """A stdout for call_command that keeps each written line."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, s: str) -> None:
        self.lines.extend(s.rstrip("\n").split("\n"))

    def flush(self) -> None:
        pass
