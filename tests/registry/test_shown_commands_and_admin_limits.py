"""Commands a page shows quote every source, admin actions declare their permission, and bulk updates refuse a value
longer than its column. Each test reproduces the attack; runs on SQLite and (db_service) again on PostgreSQL."""

from __future__ import annotations

import html
import re
import subprocess

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from registry.bulk_sql import bulk_set
from registry.models import Model, Pair
from tests.real_files import pair_of
from tests.registering import reg

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

HOSTILE = "t$(touch${IFS}PWNED).gguf"


def pasted(command: str, where) -> None:
    """The command as a user pastes it into a shell (behind ``echo``, so that only the shell's own expansions run)."""
    subprocess.run(["bash", "-c", f"echo {command}"], cwd=where, capture_output=True, timeout=30, check=True)


def test_shown_commands_quote_a_hostile_source(client, headers, smollm2_path, tmp_path):
    r1 = reg(headers["r1"], "attacker/R1-GGUF", HOSTILE, finished=True)
    q05 = reg(headers["q05"], "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05-Q4_K_M.gguf", finished=True)
    page = client.get(f"/pairs/{pair_of(r1, q05).pk}/").content.decode()
    adapt = html.unescape(re.search(r'<pre class="cmd" id="adapt-command">(.*?)</pre>', page, re.S).group(1))
    assert "adapt_draft 'hf://attacker/R1-GGUF/t$(touch${IFS}PWNED).gguf'" in adapt
    # A model page suggests run_benchmark for a file llama.cpp can load (R1's header alone it cannot).
    smol = reg(smollm2_path, "attacker/Smol-GGUF", HOSTILE, finished=True)
    model = client.get(smol.get_absolute_url()).content.decode()
    bench = html.unescape(re.search(r'<code class="cmd">(manage.py run_benchmark .*?)</code>', model).group(1))
    for command in (adapt, bench):
        pasted(command, tmp_path)
    assert not (tmp_path / "PWNED").exists()


def test_view_only_staff_cannot_move_a_model_out_of_its_base(headers):
    q05 = reg(headers["q05"], "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05-Q4_K_M.gguf", finished=True)
    base = q05.model.base_id
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_model", content_type__app_label="registry"))
    c = Client()
    c.force_login(viewer)
    url = "/admin/registry/model/"
    assert c.get(url).status_code == 200 and "move_to_own_base" not in c.get(url).content.decode()
    c.post(url, {"action": "move_to_own_base", "_selected_action": [q05.model_id]})
    assert Model.objects.get(pk=q05.model_id).base_id == base
    editor = User.objects.create_user("editor", password="pw", is_staff=True)
    editor.user_permissions.add(Permission.objects.get(codename="change_model", content_type__app_label="registry"))
    c.force_login(editor)
    assert "move_to_own_base" in c.get(url).content.decode()


def test_a_bulk_update_refuses_a_value_longer_than_its_column(headers):
    r1 = reg(headers["r1"], "deepseek/R1-Distill-Qwen-7B-GGUF", "r1-7b-Q4_K_M.gguf", finished=True)
    reg(headers["q05"], "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05-Q4_K_M.gguf", finished=True)
    pair = Pair.objects.get(target_base=r1.model.base)
    before = pair.target_name
    pair.target_name = "x" * 301  # the column holds 300
    with pytest.raises(ValueError, match="registry.Pair.target_name of row .*: 301 characters, more than its 300"):
        bulk_set(Pair, [pair], ["target_name"])
    assert Pair.objects.get(pk=pair.pk).target_name == before
