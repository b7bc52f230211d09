"""Module changes in a call trace: how often one table read or one registration crosses from one specreg module
into another, and how often it crosses back into a module it is still inside.

Every Python call is watched with ``sys.setprofile``; only code in files under registry/, runner/ and inspector/
counts (Django, the standard library and other packages are seen through: a call from a specreg module through
Django into another specreg module is one change). For the traced call it prints:

- ``changes``: calls whose specreg module differs from the module of the nearest specreg caller;
- ``re-entries``: those of them into a module already on the call stack below (A calls B, which calls back into A);
- ``revisits``: those of them into a module the trace had entered and left before;
- ``modules``: the distinct specreg modules the call ran code in;
- with ``--top N``, the N most frequent module-to-module changes.

Scenarios, each on a fresh SQLite registry of generated GGUF headers (tests/ggufgen.py) in a temporary folder:

- ``table``: one request for the pairs table (``/?verdict=any``) through Django's test client, the table cache off,
  after one untraced request (imports and per-process caches are not part of a read);
- ``register``: one ``register_gguf`` call registering a new file into that registry.

    .venv/bin/python tests/bench/trace_calls.py table [--files 10] [--top 15]
    .venv/bin/python tests/bench/trace_calls.py register
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = tuple(str(ROOT / name) + os.sep for name in ("registry", "runner", "inspector"))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("scenario", choices=["table", "register"], help="what one traced call does")
    p.add_argument("--files", type=int, default=10, help="generated files registered before the traced call")
    p.add_argument("--top", type=int, default=0, help="also print the N most frequent module-to-module changes")
    return p.parse_args()


def module_of(filename: str) -> str | None:
    """The dotted module of a specreg source file, None for any other file."""
    if not filename.startswith(PACKAGES):
        return None
    rel = Path(filename).relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


@dataclass
class Trace:
    changes: int = 0
    reentries: int = 0
    revisits: int = 0
    modules: set[str] = field(default_factory=set)
    left: set[str] = field(default_factory=set)
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    _modules: dict[str, str | None] = field(default_factory=dict)

    def module(self, frame: FrameType | None) -> str | None:
        name = frame.f_code.co_filename if frame is not None else ""
        if name not in self._modules:
            self._modules[name] = module_of(name)
        return self._modules[name]

    def caller_modules(self, frame: FrameType | None) -> list[str]:
        """The specreg modules on the stack below ``frame``, nearest first."""
        out = []
        while frame is not None:
            m = self.module(frame)
            if m is not None:
                out.append(m)
            frame = frame.f_back
        return out

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = self.module(frame)
        if callee is None:
            return
        self.modules.add(callee)
        below = self.caller_modules(frame.f_back)
        if not below or below[0] == callee:
            return
        self.changes += 1
        self.pairs[(below[0], callee)] += 1
        self.left.add(below[0])
        if callee in below[1:]:
            self.reentries += 1
        if callee in self.left:
            self.revisits += 1


def traced(call: Callable[[], object]) -> Trace:
    trace = Trace()
    sys.setprofile(trace.profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return trace


def setup_django(data_dir: Path) -> None:
    os.environ["SPECREG_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "registry.settings"
    os.environ["SPECREG_TABLE_CACHE_SECONDS"] = "0"  # a read, not a cache hit
    os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def write_files(folder: Path, n: int) -> list[Path]:
    """``n`` small models of one vocabulary, every third with one token changed (incompatible, perhaps adaptable)."""
    from tests.ggufgen import vocab, write_gguf

    paths = []
    for i in range(n):
        tokens = vocab(120)
        if i % 3 == 2:
            tokens[60] = f"changed{i}"
        paths.append(write_gguf(folder / f"model{i}-Q{4 + i % 4}_K.gguf", tokens=tokens, bos=1, eos=2))
    return paths


def fill(folder: Path, n: int) -> None:
    from django.conf import settings

    from registry.catalog.local_files import register_local

    settings.SPECREG_LISTED_MIN_RATIO = 1.0  # every pair listed, equal sizes too (registry.catalog.listing)
    for path in write_files(folder, n):
        register_local(path)


def table_read() -> Callable[[], object]:
    from django.test import Client

    client = Client()

    def read() -> object:
        response = client.get("/?verdict=any")
        if response.status_code != 200:
            raise SystemExit(f"the table answered {response.status_code}")
        return response

    read()  # imports, URL resolving and per-process caches happen once, before the traced read
    return read


def registration(folder: Path) -> Callable[[], object]:
    from django.core.management import call_command

    from tests.ggufgen import vocab, write_gguf

    new = write_gguf(folder / "new-model-Q8_0.gguf", tokens=vocab(120), bos=1, eos=2)
    return lambda: call_command("register_gguf", str(new), stdout=io.StringIO())


def report(args: argparse.Namespace, trace: Trace) -> None:
    print(f"scenario:   {args.scenario} ({args.files} files registered before)")
    print(f"changes:    {trace.changes}")
    print(f"re-entries: {trace.reentries}")
    print(f"revisits:   {trace.revisits}")
    print(f"modules:    {len(trace.modules)}")
    for (a, b), n in trace.pairs.most_common(args.top):
        print(f"  {n:6d}  {a} -> {b}")


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="specreg-trace-") as tmp:
        folder = Path(tmp)
        (folder / "data").mkdir()
        (folder / "files").mkdir()
        setup_django(folder / "data")
        fill(folder / "files", args.files)
        call = table_read() if args.scenario == "table" else registration(folder / "files")
        report(args, traced(call))


if __name__ == "__main__":
    main()
