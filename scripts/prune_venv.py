"""Uninstall from the venv what ``mcpfleet[test]`` no longer requires, so the venv matches the checkout.

``pip install`` adds and upgrades but never removes: a pin the lock dropped stays in a venv that an older
checkout set up, and can still change behaviour (jsonschema imported ``rfc3987-syntax`` whenever it was
installed, 2.5 s of CPU in every process; see runner/toolcalls/iri.py). This walks the requirements of the
installed ``mcpfleet`` distribution with its ``test`` extra, through the installed distributions, markers
evaluated for this interpreter, and uninstalls every other distribution but pip's own tooling.

    .venv/bin/python scripts/prune_venv.py [--dry-run]     # run from outside the repo (see setup.sh)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name as canonical  # PEP 503: Foo_Bar.baz is foo-bar-baz
except ImportError:  # not installed by itself: pip's vendored copy
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name as canonical  # type: ignore[no-redef]

ROOT = "mcpfleet"
EXTRAS = ("test",)
TOOLING = frozenset({"pip", "setuptools", "wheel"})  # the venv's installer, never a dependency to prune


def closure(requires: Mapping[str, list[str]], root: str = ROOT, extras: Iterable[str] = EXTRAS) -> set[str]:
    """The distributions ``root[extras]`` needs, by canonical name: ``requires`` maps each installed
    distribution to its requirement strings (``Requires-Dist``). A requirement's extras pull in the lines
    whose marker holds for that extra; a requirement on something not installed is followed no further."""
    needed: dict[str, set[str]] = {}  # name -> the extras already followed
    todo = [(canonical(root), set(extras))]
    while todo:
        name, wanted = todo.pop()
        if name in needed and wanted <= needed[name]:
            continue
        needed.setdefault(name, set()).update(wanted)
        for line in requires.get(name, []):
            req = Requirement(line)
            holds = req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (wanted or {""}))
            if holds:
                todo.append((canonical(req.name), set(req.extras)))
    return set(needed)


def installed() -> dict[str, list[str]]:
    """Every distribution of this interpreter's environment, by canonical name, with its requirements."""
    return {canonical(d.metadata["Name"]): list(d.requires or []) for d in metadata.distributions()}


def extraneous(requires: Mapping[str, list[str]]) -> list[str]:
    """What to uninstall: installed, not needed by ``mcpfleet[test]``, not pip's tooling. Nothing at all when
    mcpfleet itself is not installed (then nothing says what is needed)."""
    if canonical(ROOT) not in requires:
        return []
    return sorted(set(requires) - closure(requires) - TOOLING)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="print what would be uninstalled, uninstall nothing")
    args = ap.parse_args()
    names = extraneous(installed())
    if not names:
        return
    verb = "would uninstall" if args.dry_run else "uninstalling"
    print(f"setup: {verb} what mcpfleet[test] no longer requires: {' '.join(names)}")
    if not args.dry_run:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", *names], check=True)


if __name__ == "__main__":
    main()
