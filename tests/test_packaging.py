"""pyproject.toml as setuptools reads it: `pip install` (scripts/setup.sh, the runner image) prints no setuptools
warning, and the wheel holds every data file the package reads (templates, .sql, .json)."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """A package's folder, through setuptools' package-dir mapping (mcpfleet.sites.shop -> sites/shop)."""
    mapping = SETUPTOOLS["package-dir"]
    top = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
    return REPO / mapping[top] / Path(*package[len(top) :].split(".")[1:])


def _data_files() -> list[str]:
    """The non-Python files git tracks under the packages' folders, as paths in the wheel."""
    roots = {REPO / folder: top for top, folder in SETUPTOOLS["package-dir"].items()}
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", *(str(r.relative_to(REPO)) for r in roots)],
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    found = []
    for name in filter(None, listed.stdout.split("\0")):
        path = REPO / name
        if path.suffix in (".py", ".pyi") or path.name == "Dockerfile":
            continue
        root = next(r for r in roots if path.is_relative_to(r))
        found.append("/".join([*roots[root].split("."), *path.relative_to(root).parts]))
    return sorted(found)


def test_the_license_is_an_spdx_expression_and_the_build_requires_a_setuptools_that_reads_it() -> None:
    """A `{text = ...}` table made setuptools print a deprecation warning (three times) on every install."""
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    [setuptools] = [Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    assert not setuptools.specifier.contains("76.9") and setuptools.specifier.contains("77.0")


def test_every_data_file_is_package_data_of_the_folder_it_is_in() -> None:
    """A glob reaching into a subfolder ("templates/*.html") made setuptools warn that the package
    mcpfleet.sites.admin.templates is absent from `packages`, once per template folder."""
    packages, data = set(SETUPTOOLS["packages"]), SETUPTOOLS["package-data"]
    assert all("/" not in glob for globs in data.values() for glob in globs), data
    for package in data:
        assert package in packages and _folder(package).is_dir(), package
    for wheel_path in _data_files():  # each one in a listed package and matched by that package's globs
        folder, _, name = wheel_path.rpartition("/")
        package = folder.replace("/", ".")
        assert package in packages, f"{wheel_path}: its folder {package} is not in [tool.setuptools] packages"
        assert any(fnmatch.fnmatch(name, g) for g in data.get(package, [])), f"{wheel_path}: not package data"


def test_the_wheel_builds_without_a_setuptools_warning_and_holds_every_data_file(tmp_path: Path) -> None:
    built = subprocess.run(  # from outside the repo: its operator/ folder shadows the standard library's operator
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    said = built.stdout + built.stderr
    if built.returncode != 0 and "No matching distribution found for setuptools" in said:
        pytest.skip("no package index to fetch the build backend from")
    assert built.returncode == 0, said
    assert "BuildBackendWarning" not in said and "SetuptoolsDeprecationWarning" not in said, said
    [wheel] = tmp_path.glob("mcpfleet-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in _data_files() if f not in names]
    assert not missing, missing
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()
