#!/usr/bin/env python
"""Django's command-line utility for specreg.

``inspect_gguf`` and ``check_pair`` run without Django (inspector.cli): setting Django up alone
takes longer than reading two headers, and these commands need no database.
"""

import os
import sys

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("inspect_gguf", "check_pair"):
        from inspector.cli import main

        sys.exit(main(sys.argv[1:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
