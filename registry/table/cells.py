"""A table row's cells: its display strings and its <tr>, formatted once per row from the stored columns it was
read with (the template only places the rows)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from html import escape

from django.utils.safestring import SafeString, mark_safe

from inspector.spec_flags import draft_label, is_draftless
from inspector.state import STATE_KV, STATE_LABELS
from registry.formatting import params
from registry.models import Pair
from registry.pair_state import state_of
from registry.results.figures import Figure
from registry.table.records import TableFile, TablePair


@dataclass
class Row:
    pair: TablePair
    best: Figure | None

    @cached_property
    def view(self) -> dict[str, str]:
        """Display strings, formatted once here: the template then only looks them up (it is the hot path)."""
        p, b = self.pair, self.best
        speed = "" if not b or b.speedup is None or b.note else ("win" if b.speedup > 1 else "loss")
        method = b.method if b else ""
        # The target's own pair (target = draft) carries its draftless results: no draft model is used.
        draftless = bool(method) and is_draftless(method) and p.target.pk == p.draft.pk
        return {
            "url": f"{PAIR_URL}{p.pk}/",
            "target": p.target.model.shown,
            "target_sub": file_sub(p.target),
            "draft": draft_label(method) if draftless else p.draft.model.shown,
            "draft_sub": "the target alone" if draftless else file_sub(p.draft),
            # the draft file on its model's page, as the pair page links it (none for a method with no draft model)
            "draft_url": "" if draftless else f"{MODEL_URL}{p.draft.model_id}/?file={p.draft.pk}",
            "method": method or "–",
            "ratio": "–" if p.size_ratio is None else f"{p.size_ratio:.1f}×",
            "k": str(b.k) if b and b.k else "–",
            "acceptance": "–" if not b or b.acceptance is None else f"{b.acceptance * 100:.1f}%",
            "speedup": "–" if not b or b.speedup is None or b.note else f"{b.speedup:.2f}×",
            # A figure the measurement cannot tell from noise reads as what it is (registry.results.standing).
            "note": b.note_text if b else "",
            "speed_class": speed,
            "kind": b.kind if b else "",
            "content_type": b.content_type if b else "",
            # the best predicted setting: its own column, never mixed into the measured/reported one
            "predicted": "" if p.predicted_speedup is None else f"{p.predicted_speedup:.2f}×",
            "predicted_sub": " ".join(
                x
                for x in (p.predicted_method, f"K={p.predicted_k}" if p.predicted_k else "", p.predicted_content_type)
                if x
            ),
            "predicted_class": "" if p.predicted_speedup is None else ("win" if p.predicted_speedup > 1 else "loss"),
        }

    @cached_property
    def html(self) -> SafeString:
        """The row's <tr>, every value escaped here: 50 rows through the template language cost
        more than the page's queries, so the template only places the rows (its structure stays there)."""
        v, p = {k: escape(x) for k, x in self.view.items()}, self.pair  # html.escape: Django's, minus its lazy wrapper
        if v["note"]:
            sub = f'<div class="sub">{v["content_type"]}</div>' if v["content_type"] else ""
            speed = (
                f'<span class="muted unheadlined">{v["note"]}</span> <span class="badge {v["kind"]}">{v["kind"]}</span>'
                f"{sub}"
            )
        elif v["kind"]:
            sub = f'<div class="sub">{v["content_type"]}</div>' if v["content_type"] else ""
            speed = (
                f'<span class="{v["speed_class"]}">{v["speedup"]}</span> '
                f'<span class="badge {v["kind"]}">{v["kind"]}</span>{sub}'
            )
        else:
            speed = '<span class="muted">not benchmarked</span>'
        predicted = (
            f'<span class="{v["predicted_class"]}">{v["predicted"]}</span> <span class="badge predicted">predicted'
            f'</span><div class="sub">{v["predicted_sub"]}</div>'
            if v["predicted"]
            else '<span class="muted">–</span>'
        )
        verdict = (
            f'<span class="partial">{escape(verdict_text(p))}</span>'
            if p.compatible and p.verdict == Pair.VERDICT_PARTIAL
            else '<span class="ok">compatible</span>'
            if p.compatible
            else f'<span class="fail">fails {escape(p.failed_rule)}</span>'
        )
        draft = f'<a href="{v["draft_url"]}" class="draft-link">{v["draft"]}</a>' if v["draft_url"] else v["draft"]
        state = state_of(p)
        if state.kind != STATE_KV:  # checkpoints, bounded rollback or no speculation: the rollback's cost, named
            verdict += f'<div class="sub state" title="{escape(state.cost)}">{escape(STATE_LABELS[state.kind])}</div>'
        if p.adaptable:  # adapt_draft could give the draft the target's special tokens (registry.adapt_stored)
            verdict += f'<div class="sub adaptable">adaptable: {escape(p.adaptable["summary"])}</div>'
        return mark_safe(  # noqa: S308 - every value above went through escape()
            f'<tr>\n    <td><a href="{v["url"]}" class="pair-link">{v["target"]}</a>'
            f'<div class="sub">{v["target_sub"]}</div></td>\n'
            f'    <td>{draft}<div class="sub">{v["draft_sub"]}</div></td>\n'
            f'    <td class="num">{v["ratio"]}</td>\n    <td class="method">{v["method"]}</td>\n'
            f'    <td class="num">{v["k"]}</td>\n'
            f'    <td class="num">{v["acceptance"]}</td>\n    <td class="num">{speed}</td>\n'
            f'    <td class="num">{predicted}</td>\n'
            f"    <td>{verdict}</td>\n  </tr>\n"
        )


def verdict_text(p: TablePair | Pair) -> str:
    """The row's verdict in words: "compatible", "partial: N of M draft quants", or "incompatible (rule)"."""
    if not p.compatible:
        return f"incompatible ({p.failed_rule or 'unknown rule'})"
    nm = getattr(p, "compatible_quants", None)
    if p.verdict == Pair.VERDICT_PARTIAL:
        if nm and nm[0] == nm[1]:
            # every draft quant works with the file this row shows: what is partial is the target's other quants
            quants = f"{nm[1]} draft quant{'s' if nm[1] != 1 else ''}"
            return f"partial: all {quants} with this target file, not every target quant"
        return f"partial: {nm[0]} of {nm[1]} draft quants" if nm else "partial: some quants"
    return "compatible"


PAIR_URL = "/pairs/"  # checked against reverse("pair") by a test
MODEL_URL = "/models/"  # and this against reverse("model")


def file_sub(f: TableFile) -> str:
    # The pair is of base models: the file shown is the one it was checked on, and the count says how many
    # quants (over every repository) the model has.
    more = f" · {f.model.quants} quants" if f.model.quants and f.model.quants > 1 else ""
    # A header-only upload lists no tensors: its model's size (other files, else its size label) stands in, marked ≈.
    size = params(f.parameter_count) if f.parameter_count else f"≈{params(f.model.base_parameters)}"
    return f"{f.file_type} · {size if size != '≈–' else '–'} · {f.repo or 'local'}{more}"
