"""import_hf OWNER/REPO: register a Hub repository's GGUF files, reading only their headers."""

from __future__ import annotations

from inspector.management.base import SpecregCommand, UserError
from registry.hub.importing import HubImportError, hub_job_deadline, import_hf


class Command(SpecregCommand):
    help = (
        "Register the .gguf files of a Hugging Face model repository: headers are read by Range "
        "requests, nothing is downloaded. Gated or private repos need HF_TOKEN. Unchanged files "
        "are skipped. Exit status: 0 all imported, 1 some files failed, 2 error."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("repo", help="OWNER/REPO (or hf://OWNER/REPO)")
        parser.add_argument(
            "--include", metavar="GLOB", help="only files matching GLOB (case-insensitive), e.g. '*Q4_K_M*'"
        )
        parser.add_argument("--revision", metavar="REV", help="branch, tag or commit (default: the main branch)")

    def handle(self, *args, repo: str, include: str | None, revision: str | None, **options) -> None:
        def progress(o) -> None:
            extra = f" ({o.message})" if o.message else (f" (+{o.pairs_added} pairs)" if o.pairs_added else "")
            self.stdout.write(f"{o.status:<9} {o.source}{extra}")

        try:
            with hub_job_deadline():  # as for the web's import jobs: one end for all its reads
                report = import_hf(repo, revision=revision, include=include, progress=progress)
        except HubImportError as exc:
            raise UserError(str(exc)) from None
        self.stdout.write(report.summary())
        if report.failed:
            self.stdout.flush()
            raise SystemExit(1)
