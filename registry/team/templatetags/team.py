"""Template tags that put notes and deployments on the model, pair and run pages.

Tags rather than view code, so each page gains its sections with one line in its template and the
pages' views (shared with other work) stay as they are; what is shown comes from notes.py and
deployments.py.
"""

from __future__ import annotations

from django import template

from registry.access.policy import may_see_paths
from registry.team import deployments as deps
from registry.team import notes as notes_mod
from registry.team.forms import NoteForm
from registry.team.plot import observed_svg
from registry.team.telemetry import may_see_reasons, observed, series

register = template.Library()
PLOTS_PER_PAGE = 3  # deployments drawn inline on a pair page; the rest link to their own pages


@register.inclusion_tag("team/_notes.html", takes_context=True)
def team_notes(context, subject, *more, title: str = "Notes"):
    """Notes on ``subject`` (and on ``more`` subjects, e.g. a model page's current file), and the add form."""
    request = context["request"]
    user = request.user
    kind = notes_mod.subject_field(subject)
    items = [
        (n, notes_mod.render(n.body), notes_mod.may_edit(user, n)) for n in notes_mod.notes_on([subject, *more], user)
    ]
    return {
        "request": request,
        "user": user,
        "notes": items,
        "kind": kind,
        "subject": subject,
        "title": title,
        "form": NoteForm() if notes_mod.may_write(user) else None,
        "may_hide": notes_mod.may_hide(user),
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("team/_deployments.html", takes_context=True)
def team_deployments(context, pair=None, files=None):
    """Deployments of a pair, or of any of these files; with what each observed in production."""
    request = context["request"]
    qs = deps.deployments_of(pair=pair, file_ids=[f.pk for f in files] if files is not None else None)
    rows = []
    for i, d in enumerate(qs[:100]):
        ref = deps.measured_reference(d)
        obs = observed(d)
        plot = ""
        if pair is not None and i < PLOTS_PER_PAGE and obs.samples + obs.gaps:
            plot = observed_svg(
                series(d, limit=500, staff=may_see_reasons(request.user)),
                measured_tps=ref.tokens_per_second if ref else None,
                measured_acceptance=ref.acceptance if ref else None,
                title=f"Observed on deployment {d.pk}",
            )
        rows.append({"d": d, "observed": obs, "measured": ref, "plot": plot})
    new_link = None
    if deps.may_record(request.user):
        new_link = f"?pair={pair.pk}" if pair is not None else None
    return {"rows": rows, "user": request.user, "new_link": new_link, "show_host": may_see_paths(request.user)}
