"""A local run's full-text search index: SQLite FTS5 (the standard library's sqlite3) with its trigram tokenizer.

Every searched file of every trial (search.FILES) is one row, its text as stored. A query's forms (search.py:
as written, JSON-escaped once and twice) become ``LIKE '%form%'`` patterns, which FTS5 answers from its trigram
index (the rows holding every three-character piece of the form) and then checks against the row's text, so a
string that appears only inside one tool result is found among 10,000 trials without reading their files. The
index only chooses the candidates: search.scan reads and checks each one as a scan would, so answers and
snippets are the same as without it. ``%`` and ``_`` of a query are LIKE's wildcards: they are matched as any
one character here (more candidates, never fewer) and exactly by that check. A query is a bound parameter,
never SQL or FTS5 syntax, whatever it holds.

Built once per run folder state (cache.py), in a thread of its own after the run's first search, kept in the
viewer's cache (about the size of the files' text); a search before it is ready scans.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from mcpfleet.runner.report.viewer.cache import write_private

SCHEMA = (
    "CREATE VIRTUAL TABLE docs USING fts5(trial_id UNINDEXED, file UNINDEXED, body, tokenize='trigram', detail='none')"
)
QUERY = "SELECT trial_id, file FROM docs WHERE body LIKE ?"


def available() -> bool:
    """Whether this Python's SQLite has FTS5 with the trigram tokenizer (SQLite 3.34 or later)."""
    try:
        with contextlib.closing(sqlite3.connect(":memory:")) as db:
            db.execute(SCHEMA)
    except sqlite3.Error:
        return False
    return True


def _pattern(form: str) -> str:
    return "%" + form.replace("%", "_") + "%"


class SearchIndex:
    def __init__(self, path: Path):
        # Read only, from the server's threads one at a time (the app's lock).
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)

    @classmethod
    def open(cls, path: Path, state: str) -> SearchIndex | None:
        """The index at ``path`` if it was built for ``state``, else None."""
        try:
            index = cls(path)
            got = index.db.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()
        except sqlite3.Error:
            return None
        if got is None or got[0] != state:
            index.close()
            return None
        return index

    @classmethod
    def build(
        cls,
        path: Path,
        state: str,
        trial_ids: Iterable[str],
        read: Callable[[str, str], bytes | None],
        files: Iterable[str],
    ) -> SearchIndex:
        """Index every ``read(trial, file)`` of the trials, written whole (a temporary file renamed into place)."""
        names = list(files)

        def rows() -> Iterable[tuple[str, str, str]]:
            for trial_id in trial_ids:
                for name in names:
                    data = read(trial_id, name)
                    if data:
                        yield trial_id, name, data.decode("utf-8", "replace")

        def write(tmp: Path) -> None:
            with contextlib.closing(sqlite3.connect(tmp)) as db:
                db.execute("PRAGMA journal_mode = OFF")
                db.execute("PRAGMA synchronous = OFF")
                db.execute(SCHEMA)
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
                db.executemany("INSERT INTO docs VALUES (?, ?, ?)", rows())
                db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
                db.execute("INSERT INTO meta VALUES ('state', ?)", (state,))
                db.commit()

        write_private(path, write)
        return cls(path)

    def matching(self, forms: Iterable[str]) -> dict[str, set[str]]:
        """The trials (and their files) whose text holds one of ``forms`` (compared case-insensitively for ASCII
        letters, ``%`` and ``_`` as any character): the candidates search.scan checks."""
        out: dict[str, set[str]] = {}
        for form in forms:
            for trial_id, name in self.db.execute(QUERY, (_pattern(form),)):
                out.setdefault(trial_id, set()).add(name)
        return out

    def close(self) -> None:
        self.db.close()
