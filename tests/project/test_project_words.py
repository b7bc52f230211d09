"""The repository speaks of specreg alone: no tracked text file names the way it was built (work sessions, machines
lent for a while and their time, an issue tracker a clone does not have, rounds of review, a diary of runs by time of
day). Upstream citations (llama.cpp#23052, ggml-org/llama.cpp#1234) and the product's own words for the same letters
(Django's login sessions, pytest's session fixtures, a CUDA device, an HTTP client) stay."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Rule:
    """A forbidden phrase (a case-insensitive regex on word boundaries) and the contexts where the same letters are
    the product's own: ``allowed`` is searched in the text around a match (``window`` characters either side)."""

    name: str
    pattern: re.Pattern[str]
    allowed: re.Pattern[str] | None = None
    window: int = 80


def _re(text: str) -> re.Pattern[str]:
    return re.compile(text, re.IGNORECASE)


# llama.cpp's own tracker, cited by number: "llama.cpp issue #10664", "llama.cpp\nissues #28328", "ggml-org/…#1".
UPSTREAM = r"(llama\.cpp|ggml-org|ggml|lmstudio[\w-]*|huggingface[\w-]*)\W{0,3}(issues?|pr|pull)?\W{0,3}$"

RULES = (
    Rule(
        "an issue number of a tracker a clone does not have",
        _re(r"\b(issues?|tickets?|items?)\s?#?\d+(\.\d+)*\b|\(#\d+\)"),
    ),
    Rule("the issue (a tracker's)", _re(r"\b(the|this|that) issue'?s?\b")),
    Rule("the tracker", _re(r"(?<![\w-])tracker\b")),
    Rule(
        "a development session",
        _re(r"(?<![.\w-])sessions?\b(?![\w-]|\s*=|\.\w)"),
        # Django's login sessions, DRF's session authentication, pytest's session fixtures, a process session.
        _re(
            r"django|drf|csrf|\btokens?\b|log(ged)?[ -]?in|sign(ed|s|ing)?[ -]in|cookie|\bauth|middleware|"
            r"scope\s*=|fixture|setsid|process group|its own session|api_views"
        ),
    ),
    Rule("a lent machine", _re(r"\blent\b")),
    Rule("device time", _re(r"\bdevice[- ]time\b")),
    Rule("the device tool", _re(r"\bdevice (tool|machine)s?\b")),
    Rule("$OUT", _re(r"\$OUT\b")),
    Rule("give_back", _re(r"\bgive_back\b|\bbudget_left_s\b|\bfiles_at\b|\.library/(device|env|search)")),
    Rule(
        "a round of review",
        _re(
            r"\b(review|hardening)\s+rounds?\b|\bhardening\W+(first|second|third|fourth|fifth|sixth|next|last)\s+"
            r"round\b|\b(the|outside) review\b"
        ),
    ),
    Rule(
        "the client (who asked for the work)",
        _re(r"\b(the|our) client\b"),
        # an HTTP client: a request's sender, its address, its connection, a test's Django ``Client``
        _re(
            r"address|forwarded|\bip\b|proxy|hung up|hangs? up|gave up|give up|listens|\bgo\b|server|request|"
            r"deadline|socket|connect|http|``c``|speed-bench|\bsees?\b|word\b"
        ),
        window=60,
    ),
    Rule("a diary of runs by time of day", _re(r"\b(morning|afternoon|evening|night)('s)?\b")),
    Rule("a diary of runs by the clock", _re(r"\bat \d{1,2}:\d{2}\b")),
)


@dataclass(frozen=True)
class Finding:
    line: int
    rule: str
    text: str


def forbidden(text: str) -> list[Finding]:
    """Every forbidden phrase in ``text`` outside its allowed contexts, with its line (1-based)."""
    found = []
    for rule in RULES:
        for m in rule.pattern.finditer(text):
            before = text[max(0, m.start() - 30) : m.start()]
            if rule.name.startswith("an issue number") and re.search(UPSTREAM, before, re.IGNORECASE):
                continue
            if rule.allowed is not None:
                around = text[max(0, m.start() - rule.window) : m.end() + rule.window]
                if rule.allowed.search(around):
                    continue
            line = text.count("\n", 0, m.start()) + 1
            found.append(Finding(line, rule.name, text.splitlines()[line - 1].strip()[:160]))
    return sorted(found, key=lambda f: f.line)


def tracked_texts() -> list[tuple[str, str]]:
    """(path, text) of every tracked text file but this one: binary files (a NUL byte, or not UTF-8) are skipped."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    names = listed.decode().split("\0")
    out = []
    for name in filter(None, names):
        path = ROOT / name
        if name == THIS or not path.is_file():  # a file deleted in the working tree is not there to read
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            out.append((name, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out


def test_no_tracked_file_speaks_of_how_specreg_was_built():
    files = tracked_texts()
    assert len(files) > 100  # the walk found the repository
    problems = [f"{name}:{f.line}: {f.rule}: {f.text}" for name, text in files for f in forbidden(text)]
    assert not problems, "\n".join(problems)


def test_the_checker_catches_the_phrases_and_allows_the_products_own_words():
    caught = [
        "As issue 34 asks, the pair is adaptable.",
        "Fixed in (issue 33.5), item 5.",
        "see issue #12 for the plan",
        "Done within the device time left.",
        "It ran on a lent machine with one H200.",
        "Logs come back in $OUT.",
        "Then give_back the machine.",
        "Filed on the tracker.",
        "This session's changes.",
        "Two sessions later it passed.",
        "Hardening, second round: attacks.",
        "Found in the review round.",
        "An attack of the review, reproduced.",
        "As the client wanted, the table is faster.",
        "A run the same afternoon measured 24.8%.",
        "At 14:05 we ran the suite.",
    ]
    for sample in caught:
        assert forbidden(sample), sample
    assert [f.line for f in forbidden("fine\nissue 34\nfine\ndevice time")] == [2, 4]
    allowed = [
        "llama.cpp#23052 fixed the draft's cache.",
        "ggml-org/llama.cpp#1234 is upstream.",
        "llama.cpp issue #10664: llama-server, 123.25 t/s",
        "reported in llama.cpp\nissues #28328, #28756",
        "users reported it (lmstudio-bug-tracker#2409)",
        "Django's session keeps the user signed in.",
        "every /api/ answer needs a session or an API token",
        '@pytest.fixture(scope="session")',
        'assert "_auth_user_id" in client.session',
        "no CUDA device answered; pass --device none",
        "The client address comes from X-Forwarded-For.",
        "the client hung up before the header ended",
        "a speculative round costs 10.7 ms; each round drafts K tokens",
        "a timeout at 570 s; took 12.5 ms at 1.5x, p-min at 0.75",
    ]
    for sample in allowed:
        assert not forbidden(sample), (sample, forbidden(sample))
