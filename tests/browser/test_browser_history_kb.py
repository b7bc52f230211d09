"""In headless Chromium: a pair page showing a newer build's change, a re-checked verdict and imported figures."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from inspector.info import inspect_source
from registry.kb.export import export_kb
from registry.kb.importer import import_kb
from registry.models import GGUFFile, Pair
from tests.browser.chromium import shot
from tests.runs import finished_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_pair_page_shows_build_changes_verdict_changes_and_provenance(
    page,
    live_server,
    settings,
    qwen05_header_path,
    qwen15_header_path,
    tmp_path,
):
    from registry.catalog.registration import register

    for name, path in (("qwen05", qwen05_header_path), ("qwen15", qwen15_header_path)):
        register(
            inspect_source(str(path)),
            source=f"hf://org/{name}/{name}.gguf",
            repo=f"org/{name}",
            path=f"{name}.gguf",
            etag=f"e-{name}",
            size=1,
        )
    pair = Pair.objects.get()
    # Installation "lab-a" measured the pair under two builds; this installation imports its knowledge base.
    settings.SPECREG_INSTALLATION_ID = "lab-a"
    finished_run(pair, "b11000", "cpu-2c", [("code", 4, 11.4, 11.0, 11.9, 0.48)], minutes_ago=60)
    finished_run(pair, "b11434 (abc1234)", "cpu-2c", [("code", 4, 14.0, 13.5, 14.4, 0.62)], minutes_ago=10)
    export_kb(tmp_path / "kb.json")
    from registry.models import BenchmarkRun

    BenchmarkRun.objects.all().delete()
    settings.SPECREG_INSTALLATION_ID = "lab-b"
    import_kb(tmp_path / "kb.json")
    # Its verdict was stored under older rules; recheck_pairs puts it right and keeps the change.
    Pair.objects.filter(pk=pair.pk).update(compatible=False, failed_rule="vocab_size", rules_from="b4000")
    call_command("recheck_pairs", stdout=open("/dev/null", "w"))

    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    changes = page.locator("ul.build-changes li")
    assert changes.count() == 1
    assert changes.first.inner_text().startswith("faster: b11434 (abc1234) is 23% faster than b11000")
    assert (
        "incompatible (vocab_size) under the rules of b4000 → compatible under b11434"
        in page.locator("#verdict-changes").inner_text()
    )
    assert page.locator("#runs").get_by_text("(imported from installation lab-a)").count() == 2
    assert page.locator("table.runs").get_by_text("at installation lab-a").count() == 2
    shot(page, "pair-history-and-provenance")
    assert GGUFFile.objects.filter(origin_installation="lab-a").count() == 0  # the files were ours already
