"""CSV cells a spreadsheet would run: a cell that starts like a formula is text, and a cell is redacted for an
anonymous visitor before it is escaped."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import User

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import GGUFFile
from tests.ggufgen import vocab, write_gguf

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]  # db_service: CI runs these again on PostgreSQL


def test_csv_cells_that_start_like_formulas_are_text(client, db, smollm2_path, monkeypatch):
    f = register_source(str(smollm2_path)).file
    GGUFFile.objects.filter(pk=f.pk).update(source='=HYPERLINK("http://evil.example","x")')
    from registry.catalog.pairing import pair_for

    pair_for(GGUFFile.objects.get(pk=f.pk), GGUFFile.objects.get(pk=f.pk))
    client.force_login(User.objects.create_user("ann", password="x" * 12))
    body = b"".join(client.get("/pairs.csv").streaming_content).decode()
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[1][0].startswith("'=HYPERLINK") and rows[1][1].startswith("'=")


def test_an_anonymous_csv_redacts_each_cell_before_escaping_it(client, tmp_path):
    # A local file whose name is a formula: under its folder the cell needs no escape, and once the folder is
    # cut for an anonymous visitor it does.
    folder = tmp_path / "srv-models"
    folder.mkdir()
    path = write_gguf(folder / "=HYPERLINK(A1,B1).gguf", tokens=vocab(300))
    f = register_source(str(path)).file
    pair_for(f, f)
    body = b"".join(client.get("/pairs.csv?verdict=all").streaming_content).decode()
    rows = list(csv.reader(io.StringIO(body)))
    assert len(rows) == 2
    assert rows[1][0].startswith("'=HYPERLINK") and rows[1][1].startswith("'=HYPERLINK")
    assert str(folder) not in body
