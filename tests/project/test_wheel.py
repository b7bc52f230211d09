"""A built wheel runs without the checkout: the top-level templates/ travels in it (setup.py's build_py copies
it in as registry/_bundled/templates), the apps' static files too, and the settings find them there.

The wheel is built from a copy of the sources (building in the checkout would leave build/ and an egg-info
in it), without build isolation (setuptools comes from this environment: no network), then unpacked and
run from an empty folder with only the unpacked wheel on the path before this environment's packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "inspector", "registry", "runner")

pytestmark = pytest.mark.slow

# Run from the unpacked wheel: every template compiles from its bundled copy, the static files are found in
# it, and Django's system checks pass (URLs, views, apps: the whole site imports from the wheel).
FROM_THE_WHEEL = """
import sys
from pathlib import Path

import django

site, names = Path(sys.argv[1]), sys.argv[2:]
django.setup()
import registry
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.template.loader import get_template

assert Path(registry.__file__).is_relative_to(site), registry.__file__
bundled = site / "registry" / "_bundled" / "templates"
for name in names:
    origin = Path(get_template(name).origin.name)
    assert origin.is_relative_to(bundled), (name, origin)
for name in ("registry/style.css", "runner/run.js"):
    found = finders.find(name)
    assert found and Path(found).is_relative_to(site), (name, found)
call_command("check")
print(f"{len(names)} templates and the static files, from {bundled}")
"""


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_a_built_wheel_carries_the_templates_and_static_files_and_runs_from_them(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in (*SOURCES, "templates"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
        + ["-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("specreg-*.whl")

    templates = sorted(_files(ROOT / "templates"))
    static = {f"{app}/static/{f}" for app in ("registry", "runner") for f in _files(ROOT / app / "static")}
    assert "base.html" in templates and static
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as whl:
        inside = set(whl.namelist())
        whl.extractall(site)
    assert {f"registry/_bundled/templates/{t}" for t in templates} <= inside
    assert static <= inside
    assert not any(n.startswith("templates/") for n in inside)  # in the package, not a top-level folder

    elsewhere, data = tmp_path / "elsewhere", tmp_path / "data"
    elsewhere.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "SPECREG_DATA_DIR": str(data),
        "DJANGO_SETTINGS_MODULE": "registry.settings",
    }
    ran = subprocess.run(
        [sys.executable, "-c", FROM_THE_WHEEL, str(site), *templates],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"{len(templates)} templates and the static files" in ran.stdout
    assert not (ROOT / "registry" / "_bundled").exists()  # the copy is made in the build, never in the checkout
