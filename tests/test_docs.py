"""The documentation's links: every relative link in README.md and docs/ must lead somewhere.

A link's file part must name a file or folder that exists (relative to the page it is on), and an ``#anchor``
into a Markdown page must match one of that page's headings by GitHub's slug rule. Links to other sites
(http, https, mailto) are not followed. README.md stays a page for new users: at most 200 lines, linking every
page of docs/.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 200

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target), with an optional "title"; the text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
EXTERNAL = ("http://", "https://", "mailto:")


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", heading)  # a link counts as its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a page's headings give, repeated ones numbered as GitHub numbers them (-1, -2, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link and image on the page, code blocks and code spans left out."""
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        text = CODE_SPAN.sub("", line)
        targets = [m.group(1) for m in INLINE_LINK.finditer(text)] + [m.group(1) for m in HTML_LINK.finditer(text)]
        if match := REFERENCE_DEF.match(text):
            targets.append(match.group(1))
        found.extend((number, target) for target in targets)
    return found


def shown(path: Path) -> str:
    """A path as a failure names it: relative to the repository when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def broken(page: Path, target: str) -> str | None:
    """Why a link on ``page`` leads nowhere, or None when it resolves (or is not relative)."""
    if target.lower().startswith(EXTERNAL):
        return None
    path_part, _, anchor = target.partition("#")
    dest = (page.parent / unquote(path_part)).resolve() if path_part else page
    if not dest.exists():
        return f"{shown(dest)} does not exist"
    if anchor and dest.is_file() and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
        return f"{shown(dest)} has no heading for #{anchor}"
    return None


def linked_pages(page: Path) -> set[Path]:
    """The files a page links to (relative links only)."""
    result: set[Path] = set()
    for _, target in links(page):
        path_part = target.partition("#")[0]
        if path_part and not target.lower().startswith(EXTERNAL):
            result.add((page.parent / unquote(path_part)).resolve())
    return result


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    problems = [
        f"{shown(page)}:{number}: ({target}): {why}"
        for number, target in links(page)
        if (why := broken(page, target)) is not None
    ]
    assert not problems, "links that lead nowhere:\n" + "\n".join(problems)


def test_readme_is_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines; keep it at most {README_MAX_LINES} (move detail to docs/)"
    )


def test_readme_links_every_docs_page() -> None:
    missing = sorted(str(p.relative_to(REPO)) for p in DOCS.rglob("*.md") if p.resolve() not in linked_pages(README))
    assert not missing, "README.md does not link these docs pages: " + ", ".join(missing)


def test_the_link_checker_finds_broken_links(tmp_path: Path) -> None:
    """The checks above could fail: a missing file, a missing heading and a good link, told apart."""
    (tmp_path / "other.md").write_text("# A page\n\n## Some `code`, and more!\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n"
        "[ok](other.md#some-code-and-more) [self](#title) ![img](other.md) [web](https://example.com/x)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) `[code](not-a-link.md)`\n"
        "```\n[fenced](also-not-a-link.md)\n```\n",
        encoding="utf-8",
    )
    found = links(page)
    assert [t for _, t in found] == [
        "other.md#some-code-and-more",
        "#title",
        "other.md",
        "https://example.com/x",
        "missing.md",
        "other.md#nowhere",
    ]
    verdicts = {target: broken(page, target) for _, target in found}
    assert [t for t, why in verdicts.items() if why is not None] == ["missing.md", "other.md#nowhere"]
    assert slug("The `Service` contract") == "the-service-contract"
    assert slug("Export to MCPMark's layout") == "export-to-mcpmarks-layout"
    assert slug("spec.attempts and spec.agent") == "specattempts-and-specagent"
