"""expire_model_files: remove the model folder's files that nothing refers to and no one used for days."""

from __future__ import annotations

from django.conf import settings

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand, UserError
from registry.catalog.stored_files import FileInUse, expiring, remove


class Command(SpecregCommand):
    help = (
        "Remove from the model folder (SPECREG_MODEL_DIR) the adapted drafts and downloads that went unused for N days "
        "and that nothing refers to: no run or job in progress; for an adapted draft no result, benchmark run, "
        "deployment or team note; for a download (a cache of a Hub file) no deployment or team note. An adapted draft "
        "removed is unregistered. One line per file, then the total; nothing outside the folder is touched."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--older-than-days",
            type=int,
            default=None,
            help="days unused before a file goes (default: SPECREG_MODEL_FILE_EXPIRY_DAYS, 30)",
        )
        parser.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")

    def handle(self, *args, older_than_days: int | None, dry_run: bool, **options) -> None:
        days = settings.SPECREG_MODEL_FILE_EXPIRY_DAYS if older_than_days is None else older_than_days
        if days < 0:
            raise UserError(f"--older-than-days must be 0 or more, got {days}")
        verb = "would remove" if dry_run else "removed"
        count = total = 0
        for e in expiring(days, dry_run=dry_run):
            s = e.stored
            owner = s.owner.get_username() if s.owner is not None else "no one"
            size = e.size
            if not dry_run:
                try:
                    size = remove(s).freed
                except FileInUse as exc:  # a run or job started meanwhile
                    self.stderr.write(terminal_safe(f"kept {exc}"))
                    continue
            count += 1
            total += size
            self.stdout.write(
                terminal_safe(
                    f"{verb} {s.kind} {s.path} ({size:,} bytes, owner {owner}, last used {s.last_used:%Y-%m-%d})"
                )
            )
        files = "file" if count == 1 else "files"
        self.stdout.write(f"{verb} {count} {files}, {total:,} bytes, unused for {days} days or more")
