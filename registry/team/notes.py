"""Notes: who may write, edit and hide them, safe rendering, and which pairs a search finds through them."""

from __future__ import annotations

import re
from collections.abc import Iterable

import markdown
import nh3
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from registry.cache_keys import bump_generation
from registry.models import BenchmarkRun, GGUFFile, Model, Pair
from registry.team.models import NOTE_MAX_CHARS, Note, NoteVersion

# What a rendered note may contain: Markdown's own output, nothing a user could script with.
# nh3 (Ammonia) removes every other tag and attribute, javascript: links and the like.
ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "em",
    "strong",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "del",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
SEARCH_ID_LIMIT = 10_000  # pairs or files one search may find through notes (see pair_ids_matching)

Subject = Model | GGUFFile | Pair | BenchmarkRun


class NoteError(ValueError):
    """A note that cannot be saved, or a change the user may not make; one line."""


# What a browser drops from a URL before reading it (WHATWG URL parser): ASCII tab and newline anywhere,
# and C0 controls and spaces at either end. A scheme is a letter, then letters, digits, "+", "-" or ".".
_URL_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
_URL_TRIM = "".join(map(chr, range(0x21)))
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _as_a_browser_reads(href: str) -> str:
    """The href a browser follows from this page (http(s), where "\\" is read as "/")."""
    return _URL_TAB_OR_NEWLINE.sub("", href.strip(_URL_TRIM)).replace("\\", "/")


def _link_filter(element: str, attribute: str, value: str) -> str | None:
    """Links go to absolute http(s) URLs, mailto: or a path on this site; anything else is dropped (the
    link shows as text). Decided on the URL as a browser reads it, and that URL is what the page gets:
    "/\\n/host" or "/\\host" would otherwise look relative here and be followed as "//host", off the site.
    No path on this site has a backslash in it, so a relative link with one is dropped too."""
    if element != "a" or attribute != "href":
        return value
    href = _as_a_browser_reads(value)
    if _SCHEME.match(href):
        return href if href.lower().startswith(("http://", "https://", "mailto:")) else None
    return None if href.startswith("//") or "\\" in value else href


def render(body: str) -> SafeString:
    """Markdown to HTML, then sanitised: raw HTML typed into a note shows as text, never as markup."""
    # Python-Markdown passes raw HTML through by default; without its two HTML readers, "<" in a
    # note stays text (escaped on output). nh3 then removes whatever else is not on the list
    # (javascript: links above all). A Markdown object keeps state, so one per call.
    md = markdown.Markdown(extensions=["tables", "fenced_code"], output_format="html")
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    clean = nh3.clean(
        md.convert(body),
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        attribute_filter=_link_filter,
    )
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above


def may_write(user) -> bool:
    return user is not None and user.is_authenticated and user.is_active


def may_edit(user, note: Note) -> bool:
    """The author, or staff."""
    return may_write(user) and (user.is_staff or (note.author_id is not None and note.author_id == user.pk))


def may_hide(user) -> bool:
    return may_write(user) and user.is_staff


def _clean_body(body: str) -> str:
    body = body.replace("\r\n", "\n").strip()
    if not body:
        raise NoteError("a note needs some text")
    if len(body) > NOTE_MAX_CHARS:
        raise NoteError(f"a note is at most {NOTE_MAX_CHARS:,} characters (this one has {len(body):,})")
    return body


def subject_field(subject: Subject) -> str:
    for name, cls in (("model", Model), ("file", GGUFFile), ("pair", Pair), ("run", BenchmarkRun)):
        if isinstance(subject, cls):
            return name
    raise TypeError(f"notes are on models, files, pairs or runs, not {type(subject).__name__}")


def add_note(subject: Subject, body: str, user) -> Note:
    if not may_write(user):
        raise NoteError("adding a note needs an account")
    note = Note.objects.create(
        **{subject_field(subject): subject}, body=_clean_body(body), author=user, author_name=user.get_username()
    )
    bump_generation()  # the table's search finds pairs through notes
    return note


def edit_note(note: Note, body: str, user) -> Note:
    """Replace the text, keeping the old one as a version."""
    if not may_edit(user, note):
        raise NoteError("only the note's author, or staff, may edit it")
    body = _clean_body(body)
    if body == note.body:
        return note
    with transaction.atomic():
        NoteVersion.objects.create(
            note=note, body=note.body, author_name=note.author_name, written_at=note.updated_at, replaced_by=user
        )
        note.body = body
        if user.pk != note.author_id:
            note.author_name = user.get_username()  # this version's writer; the first author is in versions
        note.save(update_fields=["body", "author_name", "updated_at"])
    bump_generation()
    return note


def set_hidden(note: Note, hidden: bool, user) -> Note:
    if not may_hide(user):
        raise NoteError("only staff may hide or show a note")
    note.hidden, note.hidden_by, note.hidden_at = (
        hidden,
        (user if hidden else None),
        (timezone.now() if hidden else None),
    )
    note.save(update_fields=["hidden", "hidden_by", "hidden_at"])
    bump_generation()
    return note


def notes_on(subjects: Iterable[Subject], user=None) -> list[Note]:
    """Notes on these things, oldest first; hidden ones only for staff (marked so in the page)."""
    q = Q()
    for s in subjects:
        if s is not None:
            q |= Q(**{subject_field(s): s})
    if not q:
        return []
    qs = Note.objects.filter(q).select_related("model", "file", "pair", "run")
    if not (user is not None and user.is_authenticated and user.is_staff):
        qs = qs.filter(hidden=False)
    return list(qs[:500])


def matching_notes(text: str) -> QuerySet[Note]:
    return Note.objects.filter(hidden=False, body__icontains=text)


def pair_ids_matching(text: str) -> tuple[list[int], list[int]] | None:
    """Pairs and files whose notes (or whose model's, or whose runs') contain ``text``; None when no note does.

    Notes are written by people, so they stay few: this scans the notes table (no index), which
    costs far less than the pair table's trigram search, and only when the search text is in some
    note does the table's query grow by ``pk IN``/``target_id IN``/``draft_id IN`` lists, each
    answered by an index. Capped at SEARCH_ID_LIMIT ids each.
    """
    rows = list(matching_notes(text).values_list("model_id", "file_id", "pair_id", "run_id")[:SEARCH_ID_LIMIT])
    if not rows:
        return None
    models = {m for m, _, _, _ in rows if m}
    files = {f for _, f, _, _ in rows if f}
    pairs = {p for _, _, p, _ in rows if p}
    runs = {r for _, _, _, r in rows if r}
    if models:
        files |= set(GGUFFile.objects.filter(model_id__in=models).values_list("pk", flat=True)[:SEARCH_ID_LIMIT])
    if runs:
        pairs |= set(BenchmarkRun.objects.filter(pk__in=runs).values_list("pair_id", flat=True))
    return sorted(pairs)[:SEARCH_ID_LIMIT], sorted(files)[:SEARCH_ID_LIMIT]


def note_search_q(text: str) -> Q | None:
    """The condition that adds pairs found through notes to the table's search, or None."""
    found = pair_ids_matching(text)
    if found is None:
        return None
    pairs, files = found
    q = Q(pk__in=pairs) if pairs else Q()
    if files:
        q |= Q(target_id__in=files) | Q(draft_id__in=files)
    return q or None
