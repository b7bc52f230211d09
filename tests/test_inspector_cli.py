"""inspect_gguf and check_pair as plain commands: no Django, one-line errors, terminal-safe output."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

from gguf import GGUFValueType

from tests.ggufgen import vocab, write_gguf

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def test_the_inspector_commands_never_set_django_up(tmp_path, smollm2_path):
    # A settings module that cannot be imported: any use of Django would fail loudly.
    broken = {"DJANGO_SETTINGS_MODULE": "no.such.settings"}
    assert run("inspect_gguf", str(smollm2_path), **broken).returncode == 0
    r = run("check_pair", str(smollm2_path), str(smollm2_path), "--json", **broken)
    assert r.returncode == 0 and '"compatible": true' in r.stdout
    probe = ("import sys; sys.argv = ['manage.py', 'inspect_gguf', %r]; import runpy\n"
             "try: runpy.run_path('manage.py', run_name='__main__')\n"
             "except SystemExit: pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'gguf', 'numpy', 'huggingface_hub')))"
             % str(smollm2_path))
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]"  # a local file needs none of them


def test_control_characters_from_a_file_never_reach_the_terminal(tmp_path):
    evil = "\x1b[2J\x1b[31mowned\rX\nsecond line"
    path = write_gguf(tmp_path / "evil.gguf", tokens=vocab(300), chat_template="{{ '\x1b[5m' }}\x07",
                      kv={"general.name": (evil, GGUFValueType.STRING)})
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
