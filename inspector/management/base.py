"""Command-line conventions shared by specreg's Django management commands.

Errors are one line on stderr with exit status 2 — bad arguments included — and never a
traceback; Django's default prints "CommandError: …" and argparse prints its usage too.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser, handle_default_options
from django.db import connections

from inspector.cli import terminal_safe


class UserError(CommandError):
    """A failure to report as one line with exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=2)


def int_list(text: str) -> list[int]:
    """An argparse type: ``2,4,8`` -> [2, 4, 8]; a one-line error (exit 2) otherwise."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"expected comma-separated integers, got {text!r}", returncode=2) from None


def float_list(text: str) -> list[float]:
    """An argparse type: ``0,0.75`` -> [0.0, 0.75]; a one-line error (exit 2) otherwise."""
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"expected comma-separated numbers, got {text!r}", returncode=2) from None


class SpecregCommand(BaseCommand):
    # Set by run_from_argv: our own flag, so nothing here depends on Django's private attributes.
    from_command_line = False

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)

        def one_line_error(message: str) -> NoReturn:
            if not self.from_command_line:
                raise UserError(f"{subcommand}: {message}")
            sys.stderr.write(f"{subcommand}: {terminal_safe(message)} (see --help)\n")
            sys.exit(2)

        parser.error = one_line_error  # type: ignore[method-assign]
        return parser

    def run_from_argv(self, argv: list[str]) -> None:
        self.from_command_line = True
        parser = self.create_parser(argv[0], argv[1])
        options = parser.parse_args(argv[2:])
        cmd_options = vars(options)
        args = cmd_options.pop("args", ())
        handle_default_options(options)
        try:
            self.execute(*args, **cmd_options)
        except CommandError as exc:
            sys.stderr.write(f"{argv[1]}: {terminal_safe(str(exc))}\n")  # messages quote what files hold
            sys.exit(exc.returncode)
        except Exception as exc:  # a bug, or a failure we did not foresee: still one line
            if options.traceback:
                raise
            sys.stderr.write(
                f"{argv[1]}: unexpected {type(exc).__name__}: {terminal_safe(str(exc))} "
                "(run with --traceback for details)\n"
            )
            sys.exit(2)
        except KeyboardInterrupt:
            sys.stderr.write(f"{argv[1]}: interrupted\n")
            sys.exit(130)
        finally:
            connections.close_all()
