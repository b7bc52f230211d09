"""Installing llama.cpp for this machine: ``python -m runner.install install`` (what ``make start`` and
``make test`` run) builds (once per flag set) and installs the pinned llama.cpp (runner.llama.build), runs the
smoke check (runner.llama.smoke) and compiles the prediction tool (runner.predict.tool); ``smoke`` runs the
check alone, ``plan`` prints what would be built."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from runner.llama.build import BuildError, install, plan
from runner.llama.smoke import smoke
from runner.predict import tool


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.install", description=__doc__.split(": ``")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    inst = sub.add_parser("install", help="build (once per flag set) and install llama.cpp, then run the smoke check")
    inst.add_argument("--force", action="store_true", help="reinstall even if this build is installed")
    sub.add_parser("smoke", help="run the smoke check on the installed build")
    sub.add_parser("plan", help="print the instruction set and CMake options that would be built")
    args = parser.parse_args(argv)
    try:
        p = plan()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.cmd == "plan":
        print(json.dumps({**asdict(p), "key": p.key, "version": p.local_version}, indent=2))
        return 0
    for note in p.notes:
        print(f"note: {note}")
    if args.cmd == "install":
        try:
            install(p, force=args.force)
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    result = smoke()
    if not result.ok:
        print(f"error: smoke check failed: {result.message}", file=sys.stderr)
        return 1
    print(f"smoke check passed: {result.message}")
    if args.cmd == "install":
        build_replay_tool()
    return 0


def build_replay_tool() -> None:
    """The prediction tool, compiled against the build just installed (runner.predict.replay), so the first prediction
    does not wait for it. Without a C++ compiler a warning, not a failure: benchmarks then measure every setting."""
    try:
        print(f"replay tool ready: {tool.tool(log=print)}")
    except tool.ReplayError as exc:
        print(
            f"warning: {exc}; predictions (manage.py predict, the Predict button, predict-first benchmarks) need it",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
