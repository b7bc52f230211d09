"""Benchmark task sets (code, json, prose, math prompts) and rendering a prompt through a model's chat template."""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inspector.info import InspectError, inspect_source, token_text

DEFAULT_TASKS = Path(__file__).resolve().parent / "data" / "tasks" / "default.json"


class TaskSetError(ValueError):
    """A task-set file that cannot be used; the message says which file and why."""


@dataclass(frozen=True)
class Task:
    id: str
    content_type: str
    prompt: str
    system: str | None = None


@dataclass(frozen=True)
class TaskSet:
    name: str
    description: str
    tasks: tuple[Task, ...]

    @property
    def content_types(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for task in self.tasks:
            seen.setdefault(task.content_type, None)
        return tuple(seen)

    def by_type(self, content_type: str) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.content_type == content_type)


@dataclass(frozen=True)
class Rendered:
    """The text handed to llama.cpp; ``templated`` False means the raw prompt was used (``note`` says why)."""

    text: str
    templated: bool
    note: str | None = None


@dataclass(frozen=True)
class ChatTemplate:
    """What rendering needs from a GGUF: the Jinja source and the BOS/EOS token texts."""

    source: str | None
    bos_token: str = ""
    eos_token: str = ""
    add_bos: bool = False


def _task_from(obj: Any, where: str) -> Task:
    if not isinstance(obj, dict):
        raise TaskSetError(f"{where}: each task must be an object")
    missing = [k for k in ("id", "content_type", "prompt") if not isinstance(obj.get(k), str) or not obj.get(k)]
    if missing:
        raise TaskSetError(f"{where}: task needs non-empty string(s) {', '.join(missing)}")
    system = obj.get("system")
    if system is not None and not isinstance(system, str):
        raise TaskSetError(f"{where}: task {obj['id']}: system must be a string")
    return Task(obj["id"], obj["content_type"], obj["prompt"], system)


def parse_task_set(data: Any, where: str = "task set") -> TaskSet:
    """Validate a decoded task-set document (same schema as data/tasks/default.json)."""
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or not data["tasks"]:
        raise TaskSetError(f"{where}: expected an object with a non-empty 'tasks' list")
    tasks = tuple(_task_from(t, where) for t in data["tasks"])
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TaskSetError(f"{where}: duplicate task ids: {', '.join(dupes)}")
    return TaskSet(str(data.get("name") or where), str(data.get("description") or ""), tasks)


def load_task_set(path: str | Path | None = None) -> TaskSet:
    """The standard task set, or a user's JSON file of the same schema."""
    path = Path(path) if path is not None else DEFAULT_TASKS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskSetError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise TaskSetError(f"{path}: not valid JSON: {exc}") from None
    return parse_task_set(data, str(path))


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson HTML-escapes <, >, & and ' ; chat templates expect plain JSON.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


RENDER_SECONDS = 2.0  # real chat templates render in milliseconds
RENDER_MAX_CHARS = 1 << 20  # and make a few kilobytes
RENDER_MEMORY = 256 << 20  # bytes of address space a render may add to the process it is forked from
KILL_GRACE = 0.25  # seconds past RENDER_SECONDS before the child is killed: its own check speaks first
# The child's answer, JSON with ensure_ascii: at most 12 bytes a character (an escaped surrogate pair).
MAX_ANSWER_BYTES = 12 * RENDER_MAX_CHARS + 4096


class TemplateTooCostly(jinja2.TemplateError):
    pass


class TemplateFailed(Exception):
    """The template could not render (syntax, sandbox, raise_exception); the message is ``Type: message``."""


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """jinja2's sandbox blocks what a template may reach, not what it may cost: this one also stops a
    template that runs past RENDER_SECONDS or builds a value or an output past RENDER_MAX_CHARS.

    Time is checked wherever the sandbox already intercepts (every call, attribute and item access,
    and the operators that can multiply a size), which names the reason for most costly templates.
    Between two checks a template can still loop over a list it built (two nested loops over
    ``range(100000)|list``) and a filter can allocate unasked: render_prompt therefore renders in a
    child process that is killed at the limit (_render_isolated).
    """

    intercepted_binops = frozenset(["*", "**", "+"])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = time.monotonic() + RENDER_SECONDS

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateTooCostly(f"it ran longer than {RENDER_SECONDS:g} s")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (jinja's names)
        __self.tick()
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.tick()
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.tick()
        if operator == "**" and isinstance(right, int) and abs(right) > 64 and isinstance(left, int) and abs(left) > 1:
            raise TemplateTooCostly(f"it raised a number to the power {right}")
        if operator == "*" and isinstance(left, (str, list, tuple)) != isinstance(right, (str, list, tuple)):
            count = right if isinstance(left, (str, list, tuple)) else left
            size = len(left) if isinstance(left, (str, list, tuple)) else len(right)
            if isinstance(count, int) and count * size > RENDER_MAX_CHARS:
                raise TemplateTooCostly(f"it built a value of {count * size:,} items")
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, (str, list, tuple)) and len(result) > RENDER_MAX_CHARS:
            raise TemplateTooCostly(f"it built a value of {len(result):,} items")
        return result


def _render_bounded(env: BoundedSandbox, source: str, **context: Any) -> str:
    out: list[str] = []
    size = 0
    for chunk in env.from_string(source).generate(**context):
        size += len(chunk)
        if size > RENDER_MAX_CHARS:
            raise TemplateTooCostly(f"its output passed {RENDER_MAX_CHARS:,} characters")
        env.tick()
        out.append(chunk)
    return "".join(out)


def _render_here(source: str, context: dict[str, Any]) -> str:
    """Render in this process; TemplateTooCostly or TemplateFailed (one line) when it cannot."""
    # The same environment settings Hugging Face uses, so templates render as their authors tested them.
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    try:
        return _render_bounded(env, source, **context)
    except TemplateTooCostly:
        raise
    except MemoryError:
        raise TemplateTooCostly(f"it needed more than {RENDER_MEMORY >> 20} MiB of memory") from None
    except Exception as exc:  # any template error (syntax, sandbox, raise_exception) means: use the raw prompt
        raise TemplateFailed(" ".join(f"{type(exc).__name__}: {exc}".split())) from None


def _limit_memory() -> None:
    """In the child: what it has now (a copy of its parent) plus RENDER_MEMORY, no more."""

    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return  # not Linux: the time limit still holds
    limit = used + RENDER_MEMORY
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass  # the time limit still holds


def _child(write_fd: int, source: str, context: dict[str, Any]) -> None:
    """The forked child: render, send ``[kind, text]`` as JSON, exit without the parent's cleanup."""
    status = 1
    try:
        _limit_memory()
        try:
            answer = ["ok", _render_here(source, context)]
        except TemplateTooCostly as exc:
            answer = ["costly", str(exc)]
        except TemplateFailed as exc:
            answer = ["failed", str(exc)]
        data = json.dumps(answer).encode()
        while data:
            data = data[os.write(write_fd, data) :]
        status = 0
    finally:
        os._exit(status)  # never return into the parent's code (a worker, a test runner) in the child


def _render_isolated(source: str, context: dict[str, Any]) -> str:
    """Render in a forked child that is killed past RENDER_SECONDS and may not allocate past RENDER_MEMORY.

    The sandbox sees calls, attribute access and some operators, and stops most costly templates with
    a precise reason; a loop over a list it has already built runs unseen, and a filter can allocate
    without asking. A child process is bounded whatever it runs.
    """
    if not hasattr(os, "fork"):
        return _render_here(source, context)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, source, context)
    os.close(write_fd)
    try:
        data = _read_answer(read_fd, time.monotonic() + RENDER_SECONDS + KILL_GRACE)
    finally:
        os.close(read_fd)
        try:
            os.kill(pid, signal.SIGKILL)  # done or not, it has nothing more to say
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):  # already reaped (a SIGCHLD handler)
            pass
    try:
        kind, text = json.loads(data)
    except ValueError:
        raise TemplateTooCostly("the rendering process ended without an answer") from None
    if kind == "ok":
        return text
    raise (TemplateTooCostly if kind == "costly" else TemplateFailed)(text)


def _read_answer(fd: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TemplateTooCostly(f"it ran longer than {RENDER_SECONDS:g} s")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise TemplateTooCostly(f"its output passed {RENDER_MAX_CHARS:,} characters")
        chunks.append(chunk)


def render_prompt(prompt: str, template: ChatTemplate | None, system: str | None = None) -> Rendered:
    """Render one user turn with the model's chat template, ready for generation.

    Falls back to the raw prompt when there is no template or it fails, and says so.
    """
    if template is None or not template.source:
        return Rendered(prompt, False, "the model has no chat template; raw prompt used")
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    context = {
        "messages": messages,
        "add_generation_prompt": True,
        "bos_token": template.bos_token,
        "eos_token": template.eos_token,
    }
    try:
        text = _render_isolated(template.source, context)
    except TemplateTooCostly as exc:
        return Rendered(prompt, False, f"chat template stopped: {exc} (a hostile or broken template); raw prompt used")
    except TemplateFailed as exc:
        return Rendered(prompt, False, f"chat template failed ({exc}); raw prompt used")
    # llama.cpp adds BOS itself when the vocab asks for it; the template's copy would double it.
    if template.add_bos and template.bos_token and text.startswith(template.bos_token):
        text = text[len(template.bos_token) :]
    return Rendered(text, True)


# --- reading the template from a GGUF header -------------------------------------------------------


def read_chat_template(model: str | Path) -> ChatTemplate:
    """The chat template and BOS/EOS texts of a GGUF file, with llama.cpp's effective add_bos."""

    try:
        info = inspect_source(str(model))
    except InspectError as exc:
        raise ValueError(str(exc)) from None
    tok = info.tokenizer
    if tok is None:
        return ChatTemplate(None, "", "", False)

    def text(token_id: int) -> str:
        return token_text(info.tokens, token_id) or ""

    return ChatTemplate(tok.chat_template, text(tok.bos_id), text(tok.eos_id), tok.add_bos)
