"""Comments and docstrings in the product code state invariants and reasons; measured figures live in
docs/benchmarks.md ("Figures behind design choices"), with their machine and date, where they can be kept current.

The check reads every comment (tokenize) and every module, class and function docstring (ast) of the .py files under
inspector/, registry/ and runner/ (migrations left out) and looks for the marks a measurement leaves: a time in ms or
µs, a time something took ("~12 s", "took 13 s"), a percentage other than 0% or 100%, "measured" or "profiled"
followed by a number, a core count, a machine named as where something ran, "N x faster", a date. Text quoted in
``double backticks`` or in "double quotes" is an example of output or input, not a claim, and is left out; so are
specifications (limits, defaults, llama.cpp's constants, sizes), which carry none of these marks."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("inspector", "registry", "runner")

# (what it is, the pattern): each a mark of a figure measured on some machine
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a time in ms or µs", re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?\s?(?:ms|µs|us|ns)\b", re.IGNORECASE)),
    (
        "a time something took",
        re.compile(r"(?:~\s?|\b(?:took|takes|costs?)\s+~?)\d+(?:\.\d+)?\s?(?:s|sec|seconds?|min|minutes?|h|hours?)\b"),
    ),
    ("a percentage", re.compile(r"(?<![\d.])(?!0\s?%|100\s?%)\d+(?:\.\d+)?\s?%")),
    ("a measured figure", re.compile(r"\b(?:measured|profiled)\b[^.;()\n]{0,60}?\d", re.IGNORECASE)),
    ("a core count", re.compile(r"\b\d+[- ](?:cpu[- ])?cores?\b", re.IGNORECASE)),
    (
        "the machine it ran on",
        re.compile(r"\b(?:on|an?|one|this|that|the same)\s+(?:[\w-]+\s+){0,3}?(?:EPYC|Xeon|H100|H200|A100)\b"),
    ),
    ("a speed-up", re.compile(r"\b\d+(?:\.\d+)?\s?(?:x|×|times)\s+(?:faster|slower)\b", re.IGNORECASE)),
    ("a date", re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")),
)
QUOTED = re.compile(r"``.*?``|\"[^\"\n]*\"", re.DOTALL)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    rule: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.text}"


def _unquoted(text: str) -> str:
    """``text`` with its quoted examples blanked out, newlines kept (so offsets still give lines)."""
    return QUOTED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def figures_in_text(text: str, first_line: int = 1, path: str = "<text>") -> list[Finding]:
    """The measured figures in one comment or docstring whose first line is ``first_line``."""
    plain = _unquoted(text)
    lines = text.splitlines() or [""]
    found = []
    for rule, pattern in RULES:
        for m in pattern.finditer(plain):
            n = plain.count("\n", 0, m.start())
            found.append(Finding(path, first_line + n, rule, lines[min(n, len(lines) - 1)].strip()[:160]))
    return found


def figures_in_source(source: str, path: str = "<source>") -> list[Finding]:
    """The measured figures in the comments and docstrings of one Python source."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found += figures_in_text(tok.string, tok.start[0], path)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if ast.get_docstring(node, clean=False) is None:
            continue
        doc = node.body[0]
        assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
        found += figures_in_text(doc.value.value, doc.value.lineno, path)
    return sorted(set(found), key=lambda f: (f.path, f.line, f.rule))


def product_files() -> list[Path]:
    return sorted(
        p
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if "migrations" not in p.relative_to(ROOT).parts
    )


def test_product_comments_carry_no_measured_figures():
    files = product_files()
    assert len(files) > 100, files
    found = []
    for p in files:
        found += figures_in_source(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())
    assert not found, (
        "measured figures in comments or docstrings: move each to docs/benchmarks.md, "
        '"Figures behind design choices" (with its machine and date), and state the reason here instead:\n'
        + "\n".join(map(str, found))
    )


def test_the_check_catches_a_figure_and_passes_a_specification():
    source = '''"""A module.

Chosen because the other way measured 631 ms for 300 pairs."""

BATCH = 100  # 12.5 ms on a 2-core EPYC


def f():
    """Faster: 6% slower before, ~12 s on this machine, 9.7x faster (2026-11-27, one H200)."""
    # the default (60 s) bounds one read; llama.cpp's 10 s; SPECREG_KB_MAX_BYTES is 256 MiB
    # a 0-100% axis, 0% at the bottom, 100% at the top; cpu-2c and gpu-nvidia-h100 are class labels
    """not a docstring: 99 ms"""
    return "``stable for 8 h at 2 clients: memory +3%, acceptance 78-81%``"
'''
    found = figures_in_source(source, "sample.py")
    by_line: dict[int, set[str]] = {}
    for f in found:
        by_line.setdefault(f.line, set()).add(f.rule)
    assert by_line[3] == {"a time in ms or µs", "a measured figure"}, found
    assert by_line[5] == {"a time in ms or µs", "a core count", "the machine it ran on"}, found
    assert by_line[9] == {
        "a percentage",
        "a time something took",
        "a speed-up",
        "a date",
        "the machine it ran on",
    }, found
    assert set(by_line) == {3, 5, 9}, found  # specifications, labels and quoted examples pass
    assert str(found[0]).startswith("sample.py:3: ")

    # the comment the check exists for, alone and in a docstring
    assert figures_in_source("x = 1  # 12.5 ms on a 2-core EPYC\n")
    assert figures_in_text("Batched: one UPDATE, measured at 9,000 files.")
    assert figures_in_text("the second form backtracks: 20,000 digits took 13 s")
    assert not figures_in_text('One UPDATE per batch, ``batch`` rows each (default 1000); "50 ms" is a label.')
