"""The pairs table: search, filters, sorting and its rows from query parameters, shared by page, API and CSV."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cached_property
from html import escape
from typing import Any

from django.db.models import Q, QuerySet
from django.db.models.lookups import GreaterThanOrEqual
from django.http import QueryDict
from django.utils.safestring import SafeString, mark_safe

from inspector.spec_flags import draft_label, is_draftless
from inspector.state import STATE_KV, STATE_LABELS
from registry.cache_keys import TTL, cached
from registry.catalog.adaptable import adaptable_rows
from registry.catalog.state import state_of
from registry.formatting import params
from registry.models import Pair, ReportedResult
from registry.results.figures import Figure, best, figures_for, pairs_with_results, usable_measured
from registry.sort_keys import COLUMNS, LOW_FLOAT, sort_key
from registry.table.rows import TableFile, TablePair, fetch_rows

PAGE_SIZE = 50
MAX_PAGE = 1_000_000  # keeps OFFSET within any database's integers
MAX_CLIENTS = 32767  # BenchmarkResult.clients is a PositiveSmallIntegerField
# The verdict filter, in the words of the verdict itself (Pair.verdict: compatible, partial, incompatible over every
# combination of the two models' tokenizer classes, registry.catalog.combinations), with what it is called in the menu.
VERDICTS = {
    "usable": "compatible or partial",  # at least one combination works: the default
    "compatible": "compatible (every quant)",
    "partial": "partial (some quants)",
    "incompatible": "incompatible",
    "adaptable": "adaptable (adapt_draft can fix it)",
    "any": "any verdict",
}
DEFAULT_VERDICT = "usable"
# Older links and API clients: "all" was the filter's word for any verdict (it is not a verdict).
VERDICT_ALIASES = {"all": "any"}
SORTS = {name: column for name, (column, _, _) in COLUMNS.items()}  # ?sort= name (or "-name") -> column


class TableQueryError(ValueError):
    """A table parameter that cannot be used; the message is one line."""


@dataclass
class TableQuery:
    q: str = ""
    verdict: str = DEFAULT_VERDICT
    content_type: str = ""
    hardware: str = ""
    build: str = ""
    min_speedup: float | None = None
    method: str = ""  # llama.cpp's --spec-type of the results, e.g. ngram-mod
    clients: int | None = None  # concurrent clients of measured results (runner.measure.load); None: any
    sort: str = "-speedup"
    page: int = 1  # with a cursor: the number shown; alone: read by OFFSET (old links, typed numbers)
    after: str = ""  # keyset cursors (registry.table.keyset): the page after or before this row
    before: str = ""
    # Whether the viewer may see server paths (registry.access.policy.may_see_paths): set from the request, never
    # from a parameter, and never written into links (params()). Without it the search matches only what the
    # viewer is shown (shown_search), so a local file's folders cannot be recovered by searching letter by letter.
    search_paths: bool = field(default=False, metadata={"param": False})

    @classmethod
    def from_params(cls, params: QueryDict, *, search_paths: bool = False) -> TableQuery:
        def text(name: str, limit: int = 200) -> str:
            return params.get(name, "").strip()[:limit]

        raw = text("min_speedup", 40)
        try:
            min_speedup = float(raw) if raw else None
        except ValueError:
            min_speedup = None  # not a number at all: the filter is off, as for the other bad parameters
        if min_speedup is not None and not math.isfinite(min_speedup):
            # Refused, not dropped: a filter that silently does nothing misleads, and NaN is not JSON.
            raise TableQueryError(f"min_speedup: expected a finite number such as 1.5, got {raw!r}")
        try:
            page = min(MAX_PAGE, max(1, int(params.get("page", "1"))))
        except ValueError:
            page = 1
        try:
            clients: int | None = int(text("clients", 8)) or None
        except ValueError:
            clients = None
        if clients is not None and not 1 <= clients <= MAX_CLIENTS:
            clients = None  # no result has such a concurrency: off, as for the other bad parameters
        sort = text("sort", 20)
        if sort.lstrip("-") not in SORTS:
            sort = "-speedup"
        verdict = text("verdict", 20) or DEFAULT_VERDICT
        verdict = VERDICT_ALIASES.get(verdict, verdict)
        if verdict not in VERDICTS:
            # Refused, not replaced: a filter silently read as another shows rows the user did not ask for.
            raise TableQueryError(f"verdict: expected one of {', '.join(VERDICTS)}, got {verdict!r}")
        return cls(
            q=text("q"),
            verdict=verdict,
            content_type=text("content_type", 32),
            hardware=text("hardware"),
            build=text("build", 32),
            min_speedup=min_speedup,
            method=text("method", 32),
            clients=clients,
            sort=sort,
            page=page,
            after=text("after", 1000),
            before="" if params.get("after") else text("before", 1000),
            search_paths=search_paths,
        )

    @property
    def viewer(self) -> str:
        """What the viewer may see, as cached pages and counts are keyed (registry.cache_keys.cached): the same
        query finds other pairs for a viewer who may see server paths ("paths") than for one who may not ("public")."""
        return "paths" if self.search_paths else "public"

    @property
    def result_filters(self) -> dict[str, Any]:
        return {
            "content_type": self.content_type,
            "hardware": self.hardware,
            "build": self.build,
            "min_speedup": self.min_speedup,
            "method": self.method,
            "clients": self.clients,
        }

    @property
    def filters_results(self) -> bool:
        """Whether the filters look inside results (then rows show the best *matching* result)."""
        return bool(self.content_type or self.hardware or self.build or self.method) or self.clients is not None

    def params(self, **override: Any) -> dict[str, str]:
        """Query parameters for a link to this table with some values changed (defaults left out).

        A link that changes the page, the sort or a filter drops the cursors unless it sets one.
        """
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("param", True)}
        if override.keys() - {"after", "before"}:
            values |= {"after": "", "before": ""}
        values |= override
        default = TableQuery()
        return {k: str(v) for k, v in values.items() if v not in (None, "") and v != getattr(default, k)}


def _literal(text: str) -> str:
    """A regular expression matching ``text`` itself, read alike by PostgreSQL (AREs) and Python (SQLite's REGEXP):
    every ASCII character other than a letter or digit behind a backslash, which both read as the character."""
    return "".join(f"\\{c}" if c.isascii() and not c.isalnum() else c for c in text)


def shown_search(q: str) -> Q:
    """Pairs whose search text contains ``q`` (lower-case, one line) where a viewer who may not see server paths
    is shown it.

    That viewer is shown a Hub source whole (``hf://owner/repo/x.gguf``), a local file's source only from its
    last "/" on (registry.access.redact cuts its folder), and the model names, architectures and families whole
    (none holds a "/"). The search text keeps each of those on a line of its own (registry.catalog.columns), so
    ``q`` is shown where it lies on a line starting with ``hf://``, or, holding no "/", where no "/" follows it
    on its line. No second column (that would need a migration and a second index): the substring condition
    stays, so PostgreSQL's trigram index still finds the candidates, and the pattern only rechecks those rows.
    """
    lit = _literal(q)
    hub = f"(^|\n)(?=hf://)[^\n]*{lit}"  # real newlines: both dialects read them as themselves
    pattern = hub if "/" in q else f"{hub}|{lit}[^/\n]*(\n|$)"
    return Q(search_text__contains=q) & Q(search_text__regex=pattern)


# Functions of the search text that return a condition adding pairs to the search (or None): apps above
# the table plug in here (the team app's notes, registered in TeamConfig.ready), so the table imports none.
SEARCH_HOOKS: list[Callable[[str], Q | None]] = []


def filtered_pairs(tq: TableQuery) -> QuerySet[Pair]:
    """The table's pairs, filtered, in no order, from the pair table alone (every filter has an index)."""
    qs = Pair.objects.all()
    if tq.verdict == "usable":
        qs = qs.filter(compatible=True)
    elif tq.verdict in ("compatible", "partial"):
        qs = qs.filter(compatible=True, verdict=tq.verdict)
    elif tq.verdict == "incompatible":
        qs = qs.filter(compatible=False)
    elif tq.verdict == "adaptable":
        qs = qs.filter(adaptable_rows())
    if tq.q:
        # A trigram index on PostgreSQL (migration 0005) answers the substring search. Text spanning
        # two fields cannot match (fields are joined by newlines), as when each was searched alone.
        # Pairs other apps find for the text are added (SEARCH_HOOKS: the team app finds pairs whose
        # target, draft, pair or runs carry a note with it).
        q = tq.q.lower()
        if "\n" in q:
            qs = qs.none()
        else:
            # A viewer who may not see server paths matches only what they are shown (shown_search).
            found = Q(search_text__contains=q) if tq.search_paths else shown_search(q)
            for hook in SEARCH_HOOKS:
                more = hook(tq.q)
                if more is not None:
                    found |= more
            qs = qs.filter(found)
    if tq.filters_results:
        qs = qs.filter(pk__in=pairs_with_results(**tq.result_filters))
    elif tq.min_speedup is not None:
        qs = qs.filter(speedup_at_least(tq.min_speedup))
    return qs


def speedup_at_least(x: float) -> Q:
    # Compared through the default order's key (NULL as LOW_FLOAT), so the same index bounds the
    # range; for x above LOW_FLOAT that is the same condition as best_speedup >= x.
    if x <= LOW_FLOAT:
        return Q(best_speedup__gte=x)
    return Q(GreaterThanOrEqual(sort_key("-speedup").expressions[0], x))


def rows_for(ids: list[int], tq: TableQuery) -> list[Row]:
    """The rows of these pairs in this order: one narrow query, and one for results when filters look inside them."""
    items = fetch_rows(ids)
    if not tq.filters_results:
        return [Row(p, stored_best(p)) for p in items]
    figs = figures_for([p.pk for p in items], **tq.result_filters)
    return [Row(p, best(figs[p.pk])) for p in items]


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
            "target_sub": _file_sub(p.target),
            "draft": draft_label(method) if draftless else p.draft.model.shown,
            "draft_sub": "the target alone" if draftless else _file_sub(p.draft),
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
        if p.adaptable:  # adapt_draft could give the draft the target's special tokens (registry.catalog.adaptable)
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


def _file_sub(f: TableFile) -> str:
    # The pair is of base models: the file shown is the one it was checked on, and the count says how many
    # quants (over every repository) the model has.
    more = f" · {f.model.quants} quants" if f.model.quants and f.model.quants > 1 else ""
    # A header-only upload lists no tensors: its model's size (other files, else its size label) stands in, marked ≈.
    size = params(f.parameter_count) if f.parameter_count else f"≈{params(f.model.base_parameters)}"
    return f"{f.file_type} · {size if size != '≈–' else '–'} · {f.repo or 'local'}{more}"


def stored_best(p: Pair | TablePair) -> Figure | None:
    if not p.best_kind:
        return None
    return Figure(
        p.best_kind,
        p.best_k or 0,
        p.best_acceptance,
        p.best_speedup,
        p.best_content_type,
        "",
        "",
        method=p.best_method or "draft-simple",
        note=p.best_note,
    )


def facets() -> dict[str, list[str]]:
    """Values offered in the filter menus: those that results actually have (cached briefly)."""
    return cached("facets", "", _facets, ttl=max(TTL, 30))


def _facets() -> dict[str, list[str]]:
    out: dict[str, set[str]] = {"content_type": set(), "hardware": set(), "build": set(), "method": set()}
    for qs in (ReportedResult.objects.all(), usable_measured()):
        qs = qs.order_by()  # a model's default ordering would join the DISTINCT
        out["content_type"] |= set(qs.exclude(content_type="").values_list("content_type", flat=True).distinct())
        out["hardware"] |= set(qs.exclude(hardware="").values_list("hardware", flat=True).distinct())
        out["build"] |= set(qs.exclude(llama_cpp_build="").values_list("llama_cpp_build", flat=True).distinct())
        out["method"] |= set(qs.values_list("method", flat=True).distinct())
    facets = {k: sorted(v) for k, v in out.items()}
    # Concurrencies are measured ones only (reported figures carry none), as text like the other menus, in
    # numeric order.
    clients = usable_measured().order_by().values_list("clients", flat=True).distinct()
    facets["clients"] = [str(c) for c in sorted(set(clients))]
    return facets
