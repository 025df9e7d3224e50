"""The package structure holds: no import circle among mcpfleet's modules (every import counted: module level,
inside functions, under TYPE_CHECKING), the layer rule kept (import-linter's contract in pyproject.toml), and no
module of runner/ or operator/ over 800 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("mcpfleet.runner", "mcpfleet.operator", "mcpfleet.sites")
MAX_LINES = 800


def import_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=False)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself), Tarjan's way.
    Recursive: a few hundred modules deep at most, well inside the default recursion limit, which other tests
    rely on (the checker's too-deep schemas), so it is never raised here."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_circles_finds_a_circle_and_only_circles() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_mcpfleet_modules() -> None:
    graph = import_graph()
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert len(edges) > 100, "the graph lacks mcpfleet's modules: is mcpfleet installed (editable)?"
    assert circles(edges) == []


def test_the_layers_contract_is_kept() -> None:
    out = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports"))], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 kept, 0 broken" in out.stdout


@pytest.mark.parametrize("folder", ["runner", "operator"])
def test_no_module_over_800_lines(folder: str) -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in sorted((REPO / folder).rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these along their seams (at most {MAX_LINES} lines each): {long}"
