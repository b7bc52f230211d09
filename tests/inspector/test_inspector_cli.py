"""inspect_gguf and check_pair as plain commands: no Django, one-line errors, terminal-safe output."""

from __future__ import annotations

import io
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from gguf import GGUFValueType

from inspector.sources import FileSource, SourceError
from tests.ggufgen import vocab, write_gguf

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_the_inspector_commands_never_set_django_up(tmp_path, smollm2_path):
    # A settings module that cannot be imported: any use of Django would fail loudly.
    broken = {"DJANGO_SETTINGS_MODULE": "no.such.settings"}
    assert run("inspect_gguf", str(smollm2_path), **broken).returncode == 0
    r = run("check_pair", str(smollm2_path), str(smollm2_path), "--json", **broken)
    assert r.returncode == 0 and '"compatible": true' in r.stdout
    probe = (
        f"import sys; sys.argv = ['manage.py', 'inspect_gguf', {str(smollm2_path)!r}]; import runpy\n"
        "try: runpy.run_path('manage.py', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'gguf', 'numpy', 'huggingface_hub')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]"  # a local file needs none of them


def test_control_characters_from_a_file_never_reach_the_terminal(tmp_path):
    evil = "\x1b[2J\x1b[31mowned\rX\nsecond line"
    path = write_gguf(
        tmp_path / "evil.gguf",
        tokens=vocab(300),
        chat_template="{{ '\x1b[5m' }}\x07",
        kv={"general.name": (evil, GGUFValueType.STRING)},
    )
    r = run("inspect_gguf", str(path))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\r" not in r.stdout and "\x07" not in r.stdout
    assert "\\x1b[31mowned\\x0dX\\x0asecond line" in r.stdout
    # a hostile key in an error message: still one escaped line on stderr
    bad = tmp_path / "bad.gguf"
    key = b"k\n\x1b[31m"
    bad.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 99))
    r = run("inspect_gguf", str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "\x1b" not in r.stderr


def test_a_named_pipe_or_a_character_device_is_refused_at_once(tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    for args in (
        ("inspect_gguf", str(fifo)),
        ("check_pair", str(fifo), str(fifo)),
        ("check_pair", "/dev/zero", str(fifo)),
    ):
        r = run(*args)  # opening the FIFO would block until a writer came: the 60 s timeout would fire
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip().endswith(
            ("is a named pipe (FIFO), not a regular file", "is a character device, not a regular file")
        )
        assert len(r.stderr.splitlines()) == 1
    with pytest.raises(SourceError, match="named pipe"):
        FileSource.open(fifo)


def test_json_output_stays_json_with_every_control_character_escaped(tmp_path):
    name = "a\x1b[2Jb\x9b31mc\u202ed\ne"
    path = write_gguf(tmp_path / "evil.gguf", tokens=vocab(300), kv={"general.name": (name, GGUFValueType.STRING)})
    r = run("inspect_gguf", str(path), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["name"] == name  # the same data…
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", r.stdout)  # …with nothing raw on the terminal


def test_check_pair_escapes_token_texts_it_quotes(tmp_path):
    target = write_gguf(tmp_path / "t.gguf", tokens=vocab(300))
    draft = write_gguf(tmp_path / "d.gguf", tokens=vocab(10) + ["\x1b]0;pwned\x07"] + vocab(300)[11:])
    r = run("check_pair", str(target), str(draft))
    assert r.returncode == 1, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\\x1b]0;pwned" in r.stdout


def test_call_command_prints_what_the_command_line_prints(tmp_path, smollm2_path, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    other = write_gguf(tmp_path / "other.gguf", tokens=vocab(300))
    for args, status in [
        (("inspect_gguf", str(smollm2_path), "--tokens", "3"), 0),
        (("check_pair", str(smollm2_path), str(smollm2_path), "--json"), 0),
        (("check_pair", str(smollm2_path), str(other)), 1),
    ]:
        r = run(*args)
        assert r.returncode == status, r.stderr
        out = io.StringIO()
        if status:
            with pytest.raises(SystemExit) as exc:
                call_command(*args, stdout=out)
            assert exc.value.code == status
        else:
            call_command(*args, stdout=out)
        assert out.getvalue() == r.stdout
    r = run("inspect_gguf", str(tmp_path / "missing.gguf"))
    assert r.returncode == 2 and r.stderr == f"inspect_gguf: {tmp_path / 'missing.gguf'}: no such file\n"
    with pytest.raises(CommandError) as err:
        call_command("inspect_gguf", str(tmp_path / "missing.gguf"))
    assert err.value.returncode == 2 and str(err.value) == f"{tmp_path / 'missing.gguf'}: no such file"


def test_a_token_is_shown_one_way_wherever_it_appears(tmp_path):
    path = write_gguf(tmp_path / "t.gguf", tokens=[b"<unk>", b"\xff<s>\x1b"] + vocab(300)[2:], bos=1, add_bos=True)
    r = run("inspect_gguf", str(path), "--tokens", "2")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if "<s>" in line]
    # the BOS/EOS line, the "bos id" line and the token list: an invalid byte and ESC both read \xNN
    assert len(lines) == 3 and all("1 '\\xff<s>\\x1b'" in line for line in lines), lines
    r = run("inspect_gguf", str(path), "--tokens", "2", "--json")
    assert json.loads(r.stdout)["tokens"][1] == "\\xff<s>\x1b"  # JSON: the same text, its own escaping
