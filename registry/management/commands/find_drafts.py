"""find_drafts TARGET: compatible drafts already registered, then candidates found and checked on the Hub;
EAGLE-3 / DFlash sidecars for the target listed apart, with their method and its verdict."""

from __future__ import annotations

import json
from typing import Any

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand, UserError
from inspector.state import STATE_KV, STATE_LABELS
from registry.adapt_stored import api_value, label
from registry.hub.drafts import AdaptableDraft, DraftSearch, DraftSearchError, find_drafts, sidecar_method
from registry.pair_state import state_of
from registry.web.serializers import pair_row, unlisted_ref


def sidecar_rows(search: DraftSearch) -> list[dict[str, Any]]:
    """Sidecars already paired with the target, then those the Hub search checked: method and verdict."""
    rows = [
        {
            "repo": p.draft.repo or None,
            "source": p.draft.source,
            "method": sidecar_method(p.draft),
            "status": "compatible" if p.compatible else "incompatible",
            "why": "registered",
            "message": "",
            "pair": p,
        }
        for p in search.registered_sidecars
    ]
    return rows + [
        {
            "repo": c.repo_id,
            "source": c.pair.draft.source if c.pair else None,
            "method": c.method,
            "status": c.status,
            "why": c.why,
            "message": c.message,
            "pair": c.pair,
        }
        for c in search.sidecars
    ]


def _state_note(p: Any) -> str:
    """ ", checkpoints" or ", bounded rollback" for a pair llama.cpp does not roll back by trimming a KV cache."""
    kind = state_of(p).kind
    return "" if kind == STATE_KV else f", {STATE_LABELS[kind]}"


def adaptable_row(a: AdaptableDraft) -> dict[str, Any]:
    """A near-miss draft in JSON: its pair's row (whose ``adaptable`` is decided on the pair's own two files) and
    the decision against the target asked about, with the predicted acceptance where one exists."""
    return pair_row(a.pair) | {
        "adaptable": api_value(a.check),
        "adapt_source": {"target": a.check.target.source, "draft": a.check.draft.source},
        "predicted_acceptance": a.predicted_acceptance,
    }


class Command(SpecregCommand):
    help = (
        "List drafts for TARGET (a registered source, hf://OWNER/REPO[@REV]/PATH, or a local path): "
        "compatible files already registered, then Hub repositories of the same family, its model "
        "tree and purpose-built drafts (tagged 'draft' or named *DRAFT*), checked remotely and registered; "
        "then EAGLE-3 / DFlash sidecars named after the target or in its model tree, each checked with "
        "its method's rules."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("target")
        parser.add_argument("--no-hub", action="store_true", help="only what is registered")
        parser.add_argument("--limit", type=int, default=5, help="Hub repositories to check (default 5)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args, target: str, no_hub: bool, limit: int, **options) -> None:
        if limit < 0:
            raise UserError("--limit must be 0 or more")
        as_json = options["json"]

        def progress(c) -> None:
            if not as_json:
                what = f"sidecar {c.method or '?'}" if c.sidecar else "hub"
                self.stdout.write(f"  {what} {c.status:<12} {c.repo_id} [{c.why}] {c.message}")

        try:
            if not as_json:
                self.stdout.write(f"Drafts for {target}")
            search = find_drafts(target, hub=not no_hub, limit=limit, progress=progress)
        except DraftSearchError as exc:
            raise UserError(str(exc)) from None
        if as_json:
            self.stdout.write(
                json.dumps(
                    {
                        "target": search.target.source,
                        "registered": [
                            pair_row(p) | {"draft_files": getattr(p, "draft_files", [])} for p in search.registered
                        ],
                        "unlisted": [unlisted_ref(bc) for bc in search.unlisted],
                        # incompatible drafts adapt_draft could make acceptable, after the compatible ones
                        "adaptable": [adaptable_row(a) for a in search.adaptable],
                        "hub": [
                            {
                                "repo": c.repo_id,
                                "why": c.why,
                                "status": c.status,
                                "message": c.message,
                                "pair": pair_row(c.pair) if c.pair else None,
                            }
                            for c in search.hub
                        ],
                        "sidecars": [
                            {**row, "pair": pair_row(row["pair"]) if row["pair"] else None}
                            for row in sidecar_rows(search)
                        ],
                        "hub_error": search.hub_error,
                    },
                    indent=2,
                )
            )
        else:
            self.stdout.write(f"Registered compatible drafts: {len(search.registered)}")
            for p in search.registered:
                self.stdout.write(f"  {p.draft.source}  ({_ratio(p.size_ratio)}{_state_note(p)})")
                files = getattr(p, "draft_files", [])
                refused = [f for f in files if not f["compatible"]]
                if refused:
                    rules = sorted({str(f["failed_rule"]) for f in refused})
                    self.stdout.write(
                        f"    {len(refused)} of {len(files)} quants refused with this target file: {', '.join(rules)}"
                    )
                    for f in refused[:10]:
                        self.stdout.write(f"      {f['source']}: {f['failed_rule']}")
            if search.unlisted:
                self.stdout.write(f"Also compatible, without a row in the table: {len(search.unlisted)}")
                for bc in search.unlisted:
                    self.stdout.write(f"  {bc.file.source}  ({bc.base.name})")
            if not no_hub:
                self.stdout.write(f"Found on the Hub: {len(search.found)} compatible")
                for p in search.found:
                    self.stdout.write(f"  {p.draft.source}  ({_ratio(p.size_ratio)}{_state_note(p)})")
            self.write_adaptable(search)
            # Sidecars have no token table: not vocabulary pairs, each checked with its method's rules.
            rows = [r for r in sidecar_rows(search) if r["pair"] is not None]
            self.stdout.write(
                f"Sidecars for this target: {len(rows)} ({sum(r['status'] == 'compatible' for r in rows)} compatible)"
            )
            for r in rows:
                rule = r["pair"].failed_rule
                self.stdout.write(f"  {r['method']:<13} {r['source']}  {r['status']}" + (f": {rule}" if rule else ""))
        if search.hub_error:
            raise UserError(f"Hub search failed: {search.hub_error}")

    def write_adaptable(self, search: DraftSearch) -> None:
        """One line per near-miss draft adapt_draft could make acceptable, with its predicted acceptance if known."""
        self.stdout.write(f"Adaptable drafts (adapt_draft makes them acceptable): {len(search.adaptable)}")
        for a in search.adaptable:
            acc = "" if a.predicted_acceptance is None else f", predicted acceptance {a.predicted_acceptance:.1%}"
            self.stdout.write(
                terminal_safe(f"  {a.pair.draft.source}  ({label(a.check)}; fails {a.pair.failed_rule} as it is{acc})")
            )


def _ratio(r: float | None) -> str:
    """The size ratio, or that no file of either model says a size (never "0.0×")."""
    return f"size ratio {r:.1f}×" if r else "size ratio unknown"
