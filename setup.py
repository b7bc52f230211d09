"""The one build step pyproject.toml cannot state: the top-level templates/ folder travels in the wheel.

templates/ stays at the top of the checkout, where the settings find it; a built wheel carries a copy as
package data, registry/_bundled/templates, which the settings use when no checkout is around them. An
editable install copies nothing: it runs from the checkout. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
TEMPLATES = ROOT / "templates"
BUNDLED = Path("registry", "_bundled", "templates")  # registry.settings reads it from there


class BuildPyWithTemplates(build_py):
    """build_py, then templates/ copied into the built registry package (the wheel is made from that tree)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        if not TEMPLATES.is_dir():  # an sdist without it (MANIFEST.in grafts it) would build a site with no pages
            raise FileNotFoundError(f"{TEMPLATES}: the site's templates, copied into the wheel, are missing")
        target = Path(self.build_lib) / BUNDLED
        shutil.rmtree(target, ignore_errors=True)  # a file deleted from templates/ is not left in the next wheel
        shutil.copytree(TEMPLATES, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": BuildPyWithTemplates})
