"""The standard task set, user task sets, and prompts rendered through real models' chat templates."""

from __future__ import annotations

import json

import pytest

from runner.prompts import ChatTemplate, TaskSetError, load_task_set, read_chat_template, render_prompt


def test_default_task_set_has_every_content_type():
    ts = load_task_set()
    assert set(ts.content_types) == {"code", "json", "prose", "math", "edit"}
    for ct in ("code", "json", "prose", "math", "edit"):
        tasks = ts.by_type(ct)
        assert len(tasks) >= 5
        assert all(20 <= len(t.prompt) <= 600 for t in tasks)
    # edit prompts carry the text the answer repeats (code, a JSON document, a passage)
    assert len(ts.by_type("edit")) == 6 and all(len(t.prompt) >= 300 for t in ts.by_type("edit"))
    assert len({t.id for t in ts.tasks}) == len(ts.tasks)
    assert all("JSON" in t.prompt for t in ts.by_type("json"))


def test_user_task_set(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(
        json.dumps(
            {
                "name": "mine",
                "tasks": [{"id": "a", "content_type": "sql", "prompt": "Write a query.", "system": "You are terse."}],
            }
        )
    )
    ts = load_task_set(path)
    assert ts.name == "mine" and ts.content_types == ("sql",) and ts.tasks[0].system == "You are terse."


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"tasks": []}), "non-empty 'tasks'"),
        (json.dumps({"tasks": [{"id": "a", "prompt": "x"}]}), "content_type"),
        (json.dumps({"tasks": [{"id": "a", "content_type": "c", "prompt": "x"}] * 2}), "duplicate task ids: a"),
    ],
)
def test_bad_task_sets_are_rejected_clearly(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TaskSetError, match=fragment):
        load_task_set(path)


def test_smollm2_template(smollm2_path):
    tmpl = read_chat_template(smollm2_path)
    assert tmpl.source and tmpl.eos_token == "<|im_end|>"
    r = render_prompt("Say hi.", tmpl)
    assert r.templated and r.note is None
    assert r.text.endswith("<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n")


def test_qwen_template_with_system(qwen15_header_path):
    tmpl = read_chat_template(qwen15_header_path)
    r = render_prompt("Sort a list.", tmpl, system="You write Python.")
    assert r.templated
    assert r.text == (
        "<|im_start|>system\nYou write Python.<|im_end|>\n"
        "<|im_start|>user\nSort a list.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_model_without_template_uses_raw_prompt(gemma3_header_path):
    tmpl = read_chat_template(gemma3_header_path)
    assert tmpl.source is None and tmpl.bos_token == "<bos>"
    r = render_prompt("Hello", tmpl)
    assert (r.text, r.templated) == ("Hello", False) and "no chat template" in r.note


def test_template_helpers_and_failures():
    helpers = ChatTemplate("{{ strftime_now('%Y') }}|{{ messages[0]['content'] | tojson }}")
    r = render_prompt("a<b>", helpers)
    assert r.templated and r.text.split("|")[0].isdigit() and r.text.endswith('"a<b>"')
    raising = ChatTemplate("{{ raise_exception('only user/assistant roles') }}")
    r = render_prompt("x", raising)
    assert (r.text, r.templated) == ("x", False) and "only user/assistant roles" in r.note
    sandboxed = ChatTemplate("{{ ''.__class__.__mro__ }}")
    assert not render_prompt("x", sandboxed).templated


def test_bos_in_template_dropped_when_llama_adds_it():
    tmpl = ChatTemplate("{{ bos_token }}[INST] {{ messages[0]['content'] }} [/INST]", "<s>", "</s>", add_bos=True)
    assert render_prompt("hi", tmpl).text == "[INST] hi [/INST]"
    kept = ChatTemplate(tmpl.source, "<s>", "</s>", add_bos=False)
    assert render_prompt("hi", kept).text == "<s>[INST] hi [/INST]"


@pytest.mark.parametrize(
    "source, why",
    [
        ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "longer than"),
        ("{{ 'x' * 10**10 }}", "value of"),
        ("{{ 2 ** 100000000 }}", "power"),
        ("{{ 'x' * 100000000 }}", "value of"),
        ("{% set s = 'xy' * 400000 %}{{ s + s }}", "value of"),
        ("{% for a in range(100000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}", "output passed"),
    ],
)
def test_costly_chat_templates_are_stopped_quickly_with_a_clear_note(source, why):
    import time

    started = time.monotonic()
    r = render_prompt("hello", ChatTemplate(source, "<s>", "</s>", False))
    assert not r.templated and r.text == "hello"
    assert time.monotonic() - started < 2 + 10  # does not hang (the stop below is the promise): 10^10 steps
    assert r.note.startswith("chat template stopped: ") and why in r.note


@pytest.mark.parametrize(
    "source, why",
    [
        # No call, attribute or operator inside the loops: the sandbox's own checks never run.
        ("{% set x = range(100000)|list %}{% for a in x %}{% for b in x %}{% endfor %}{% endfor %}", "longer than 2 s"),
        ("{{ 'x' * 10**10 }}", "value of"),
        # A filter allocates without asking the sandbox: 500 MB at once.
        ("{{ 'x'|center(5 * 10**8) }}", "MiB of memory"),
    ],
)
def test_rendering_runs_in_a_child_that_is_killed_or_starved(source, why):
    import time

    started = time.monotonic()
    r = render_prompt("hello", ChatTemplate(source, "<s>", "</s>", False))
    assert time.monotonic() - started < 2 + 10  # does not hang: was 1e10 loop iterations, unchecked
    assert (r.text, r.templated) == ("hello", False)
    assert r.note.startswith("chat template stopped: ") and why in r.note and "\n" not in r.note


def test_rendering_in_a_child_leaves_no_process_behind_and_still_renders(monkeypatch):
    import os

    pids: list[int] = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: pids.append(pid := real_fork()) or pid)
    assert render_prompt("hi", ChatTemplate("[{{ messages[0]['content'] }}]")).text == "[hi]"
    slow = "{% set x = range(100000)|list %}{% for a in x %}{% for b in x %}{% endfor %}{% endfor %}"
    assert not render_prompt("hi", ChatTemplate(slow)).templated
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # killed and reaped: no zombie, no runaway loop
