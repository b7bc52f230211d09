"""Notes on models, files, pairs and runs: safe rendering, who may write/edit/hide, history, search, pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.team import notes
from registry.team.models import Note, NoteVersion
from tests.accounts import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


@pytest.fixture
def bob():
    return User.objects.create_user("bob", password="pw-bob-123456")


def test_raw_html_in_a_note_is_shown_as_text_and_scripts_never_reach_the_page():
    html = str(
        notes.render(
            "**bold** <script>alert(1)</script> <img src=x onerror=alert(2)> "
            '[x](javascript:alert(3)) `a<b`\n\n<div onclick="x()">block</div>'
        )
    )
    assert "<strong>bold</strong>" in html
    assert "<script" not in html and "<img" not in html and "<div" not in html
    assert "&lt;script&gt;" in html and "<code>a&lt;b</code>" in html
    assert "javascript:" not in html and "onclick" not in html.replace("&lt;div onclick", "")


def test_markdown_tables_lists_and_links_render(alice, pair):
    html = str(notes.render("- one\n- two\n\n| K | t/s |\n|---|---|\n| 4 | 11.4 |\n\n[doc](https://example.org/x)"))
    assert "<li>one</li>" in html and "<td>11.4</td>" in html
    assert 'href="https://example.org/x"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_a_logged_in_user_adds_a_note_to_a_pair_and_it_shows_on_the_page(alice, pair):
    c = client_for(alice)
    r = c.post(reverse("note_add", args=["pair", pair.pk]), {"body": "K=4 was **best** on the A10 <b>x</b>"})
    assert r.status_code == 302 and r["Location"].startswith(pair.get_absolute_url())
    note = Note.objects.get()
    assert note.pair == pair and note.author == alice and note.author_name == "alice"
    page = Client().get(pair.get_absolute_url()).content.decode()
    assert "K=4 was <strong>best</strong> on the A10 &lt;b&gt;x&lt;/b&gt;" in page and "alice" in page


def test_anonymous_visitors_cannot_add_notes(pair):
    r = Client().post(reverse("note_add", args=["pair", pair.pk]), {"body": "spam"})
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    assert not Note.objects.exists()


def test_an_empty_or_oversized_note_is_refused_with_a_message(alice, pair):
    c = client_for(alice)
    r = c.post(reverse("note_add", args=["pair", pair.pk]), {"body": "   "}, follow=True)
    assert "Note not saved" in r.content.decode()
    r = c.post(reverse("note_add", args=["pair", pair.pk]), {"body": "x" * 20_001}, follow=True)
    assert "Note not saved" in r.content.decode() and not Note.objects.exists()
    assert c.post(reverse("note_add", args=["nothing", pair.pk]), {"body": "x"}).status_code == 404


def test_notes_on_models_files_and_runs_show_on_their_pages(alice, pair):
    c = client_for(alice)
    model = pair.target.model
    run = BenchmarkRun.objects.create(pair=pair, queue="specreg", status=BenchmarkRun.DONE)
    c.post(reverse("note_add", args=["model", model.pk]), {"body": "model note"})
    c.post(reverse("note_add", args=["file", pair.target.pk]), {"body": "file note"})
    c.post(reverse("note_add", args=["run", run.pk]), {"body": "run note: the box was busy"})
    page = Client().get(model.get_absolute_url()).content.decode()
    assert "model note" in page and "file note" in page and "run note" not in page
    page = Client().get(reverse("run", args=[run.pk])).content.decode()
    assert "run note: the box was busy" in page


def test_only_the_author_or_staff_edit_and_every_old_version_is_kept(alice, bob, staff, pair):
    note = notes.add_note(pair, "first text", alice)
    url = reverse("note", args=[note.pk])
    assert client_for(bob).post(url, {"body": "vandalised"}).status_code == 403
    assert client_for(alice).post(url, {"body": "second text"}).status_code == 302
    assert client_for(staff).post(url, {"body": "third text, by staff"}).status_code == 302
    note.refresh_from_db()
    assert note.body == "third text, by staff" and note.author == alice
    assert [v.body for v in NoteVersion.objects.filter(note=note).order_by("pk")] == ["first text", "second text"]
    page = client_for(bob).get(url).content.decode()
    assert "first text" in page and "second text" in page and 'id="note-edit"' not in page


def test_staff_hide_a_note_which_then_disappears_for_everyone_else(alice, staff, pair):
    note = notes.add_note(pair, "an embarrassing note", alice)
    assert client_for(alice).post(reverse("note_hide", args=[note.pk])).status_code == 403
    assert client_for(staff).post(reverse("note_hide", args=[note.pk]), {"hidden": "1"}).status_code == 302
    note.refresh_from_db()
    assert note.hidden and note.hidden_by == staff
    assert "an embarrassing note" not in Client().get(pair.get_absolute_url()).content.decode()
    assert "an embarrassing note" not in client_for(alice).get(pair.get_absolute_url()).content.decode()
    assert Client().get(reverse("note", args=[note.pk])).status_code == 404
    staff_page = client_for(staff).get(pair.get_absolute_url()).content.decode()
    assert "an embarrassing note" in staff_page and "hidden by staff" in staff_page


def test_the_home_search_finds_pairs_through_their_notes(alice, pair):
    c = Client()
    assert "pair-link" not in c.get("/?q=wobbly-acceptance").content.decode()
    notes.add_note(pair, "Saw wobbly-acceptance under load", alice)
    page = c.get("/?q=wobbly-acceptance").content.decode()
    assert page.count('class="pair-link"') == 1 and f"/pairs/{pair.pk}/" in page
    # A note on the target's model finds every pair of that model's files.
    notes.add_note(pair.target.model, "The 1.5B likes QUIRKYWORD", alice)
    assert f"/pairs/{pair.pk}/" in c.get("/?q=quirkyword").content.decode()
    # Hidden notes are not searched.
    n = notes.add_note(pair, "zzsecretzz", alice)
    n.hidden = True
    n.save()
    assert "pair-link" not in c.get("/?q=zzsecretzz").content.decode()
    assert c.get("/api/pairs?q=wobbly-acceptance").json()["count"] == 1
