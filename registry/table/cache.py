"""The rendered pairs table, cached briefly per query and viewer: the busiest page costs one cache read."""

from __future__ import annotations

from urllib.parse import urlencode

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from registry.cache_keys import cached
from registry.table.pages import page_of
from registry.table.request import TableQuery


def rendered_table(tq: TableQuery, sort_links: dict) -> SafeString:
    def render() -> str:
        page, rows = page_of(tq)
        return str(
            render_to_string(
                "registry/_pairs_table.html",
                {
                    "tq": tq,
                    "page": page,
                    "rows": rows,
                    "sort_links": sort_links,
                    "any_verdict_query": urlencode(tq.params(verdict="any")),
                },
            )
        )

    # Rendered by our autoescaping template, cached as plain text; per query and per what the viewer may see
    # (the search finds other pairs for a viewer who may see server paths).
    return mark_safe(  # noqa: S308 - rendered by the autoescaping template above
        cached("table", urlencode(sorted(tq.params().items())), render, viewer=tq.viewer)
    )
