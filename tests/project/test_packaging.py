"""What `pip install` puts in place: every package, and console scripts that run from any folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS: dict[str, Any] = PROJECT["tool"]["setuptools"]
SCRIPTS: dict[str, str] = PROJECT["project"]["scripts"]


def folder_of(package: str) -> Path:
    """Where setuptools takes a package from: its own `package-dir` entry, its parent's, or the same path."""
    head, *rest = package.split(".")
    package_dir: dict[str, str] = SETUPTOOLS.get("package-dir", {})
    return ROOT / package_dir.get(head, head) / Path(*rest)


def installed_layout(site: Path) -> None:
    """Copy each listed package where an installation puts it, under its installed name."""
    for package in SETUPTOOLS["packages"]:
        target = site / Path(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for source in folder_of(package).glob("*.py"):
            shutil.copy(source, target)
    for package, patterns in SETUPTOOLS["package-data"].items():
        for pattern in patterns:
            for source in folder_of(package).glob(pattern):
                (site / package / source.relative_to(folder_of(package))).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, site / package / source.relative_to(folder_of(package)))


def test_every_package_folder_is_listed() -> None:
    listed = {folder_of(package) for package in SETUPTOOLS["packages"]}
    found = {
        init.parent
        for top in ("adapter", "schema_tools", "examples")
        for init in (ROOT / top).rglob("__init__.py")
        if "node_modules" not in init.parts
    }

    assert found == listed


def test_the_console_scripts_are_named_agui() -> None:
    assert sorted(SCRIPTS) == ["agui-conformance", "agui-demo"]


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_console_script_runs_from_any_folder(script: str, tmp_path: Path) -> None:
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    installed_layout(site)
    elsewhere.mkdir()
    module, _, function = SCRIPTS[script].partition(":")
    code = (
        f"import sys; sys.path[0:0] = [{str(site)!r}]; sys.argv = [{script!r}, '--help']\n"
        f"import {module} as entry, adapter; assert adapter.__file__.startswith({str(site)!r}), adapter.__file__\n"
        f"entry.{function}()"
    )

    done = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert f"usage: {script}" in done.stdout


def test_the_installed_demo_finds_its_page(tmp_path: Path) -> None:
    installed_layout(tmp_path)
    code = (
        f"import sys; sys.path[0:0] = [{str(tmp_path)!r}]\n"
        "from agui_examples.demo import WEB; print((WEB / 'index.html').is_file(), (WEB / 'app.js').is_file())"
    )

    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stdout.split()) == (0, ["True", "True"]), done.stderr
