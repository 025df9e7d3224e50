"""Full-text search over a run's trial files: messages.json, result.json and trial.log.

Each trial's three files are read (through the run's store: a local folder or S3) and searched
for the query case-insensitively, as written and in its JSON-escaped forms (a tool result sits inside a JSON
string inside messages.json, so its quotes and backslashes are escaped once or twice there). The scan stops
after ``MAX_HITS`` matching trials or ``MAX_BYTES`` read, and says so; answers are cached per run and query
(the last ``CACHE`` queries), so paging through hits or reloading costs nothing. A local run's search index
(search_index.py) names the trials that can match, and only those are read; without it (an S3 run, an index
still being built) every trial searched is. What it costs is in docs/reports.md.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

FILES = ("messages.json", "result.json", "trial.log")
MAX_HITS = 500
MAX_BYTES = 4 * 1024**3
CACHE = 32
SNIPPET = 80


@dataclass
class Hit:
    trial_id: str
    file: str
    snippet: str  # text around the first match (shown escaped)


@dataclass
class Found:
    query: str
    hits: list[Hit] = field(default_factory=list)
    scanned: int = 0
    bytes_read: int = 0
    stopped: str = ""  # why the scan stopped early, "" when it covered every trial


def forms(query: str) -> list[str]:
    """The query's forms in a file's text, lower-cased: as is, JSON-escaped once and twice."""
    q = query.lower()
    once = [json.dumps(q, ensure_ascii=a)[1:-1] for a in (False, True)]
    twice = [json.dumps(o, ensure_ascii=a)[1:-1] for o in once for a in (False, True)]
    return sorted({q, *once, *twice}, key=len)


def needles(query: str) -> list[bytes]:
    """``forms`` as a file's bytes."""
    return sorted({f.encode("utf-8", "backslashreplace") for f in forms(query)}, key=len)


def find_in(data: bytes, forms: list[bytes]) -> int:
    """The offset of the first form in ``data`` (compared lower-cased), else -1."""
    low = data.lower()
    found = [i for f in forms if (i := low.find(f)) >= 0]
    return min(found) if found else -1


def snippet(data: bytes, at: int) -> str:
    start = max(0, at - SNIPPET)
    return data[start : at + SNIPPET * 2].decode("utf-8", "replace").replace("\\n", " ").replace("\n", " ")


def scan(
    query: str,
    trial_ids: Iterable[str],
    read: Callable[[str, str], bytes | None],
    max_hits: int = MAX_HITS,
    max_bytes: int = MAX_BYTES,
    candidates: Mapping[str, Collection[str]] | None = None,
) -> Found:
    """Trials whose files hold ``query``; ``read(trial_id, file)``: the file's bytes or None. With
    ``candidates`` (search_index.py: the trials, and their files, that can hold it), only those are read."""
    out = Found(query)
    wanted = needles(query)
    if not query.strip():
        return out
    for trial_id in trial_ids:
        if len(out.hits) >= max_hits:
            out.stopped = f"stopped at {max_hits} matching trials"
            break
        if out.bytes_read >= max_bytes:
            out.stopped = f"stopped after reading {max_bytes:,} bytes"
            break
        out.scanned += 1
        names = FILES if candidates is None else [n for n in FILES if n in candidates.get(trial_id, ())]
        for name in names:
            data = read(trial_id, name)
            if not data:
                continue
            out.bytes_read += len(data)
            at = find_in(data, wanted)
            if at >= 0:
                out.hits.append(Hit(trial_id, name, snippet(data, at)))
                break
    return out


class SearchCache:
    """The last ``size`` answers, by (run, query, the trials searched)."""

    def __init__(self, size: int = CACHE):
        self.size = size
        self._got: OrderedDict[tuple[str, str, tuple[str, ...]], Found] = OrderedDict()

    def get(self, key: tuple[str, str, tuple[str, ...]], compute: Callable[[], Found]) -> Found:
        if key in self._got:
            self._got.move_to_end(key)
            return self._got[key]
        found = self._got[key] = compute()
        while len(self._got) > self.size:
            self._got.popitem(last=False)
        return found
