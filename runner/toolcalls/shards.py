"""A toolcall task's cases and their shards: where the data is, how many rows, and one shard's rows.

A toolcall task folder holds limbic-format data as ``cases.jsonl`` / ``cases.json`` / ``cases.parquet`` or a
``cases/`` folder of such files. Shard ``i`` of size ``n`` is rows ``[i*n, (i+1)*n)`` in file order. A shard
reads only its own rows' JSON from a JSONL file (the others are counted, not decoded), so 40 shards of a
10,000-row file do not each parse 10,000 rows. Rows are counted and read by one rule (``loader.jsonl_lines``:
universal newlines, ``str.strip()``), so the count and the shards agree. Case ids must be unique: the plan
(``count_cases``) refuses repeated ids across the whole data, a shard within its own rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from mcpfleet.runner.toolcalls.loader import (
    DataError,
    RowError,
    checked_row,
    data_files,
    decode_line,
    duplicate_ids,
    iter_rows,
    jsonl_lines,
)
from mcpfleet.runner.toolcalls.models import Case

CASE_NAMES = ("cases.jsonl", "cases.ndjson", "cases.json", "cases.parquet", "cases")


def cases_path(task_dir: Path) -> Path | None:
    """The task's data file or folder, or None when it has none."""
    return next((task_dir / n for n in CASE_NAMES if (task_dir / n).exists()), None)


def _jsonl(path: Path) -> bool:
    return path.suffix.lower() in (".jsonl", ".ndjson")


def _rows_in(path: Path) -> int:
    if _jsonl(path):  # the readers' own rule for what a row is (jsonl_lines), so count and shards agree
        return sum(1 for _ in jsonl_lines(path))
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataError(f"{path}: reading Parquet needs pyarrow: pip install 'mcpfleet[parquet]'") from None
        return int(pq.ParquetFile(path).metadata.num_rows)
    return sum(1 for _ in iter_rows(path))


@lru_cache(maxsize=64)
def _count(path: str, stamp: tuple[tuple[str, int, int], ...]) -> int:
    return sum(_rows_in(Path(f)) for f, _, _ in stamp)


@lru_cache(maxsize=64)
def _duplicates(path: str, stamp: tuple[tuple[str, int, int], ...]) -> str | None:
    """The duplicate-id message for the data (see loader.duplicate_ids), over rows that decode; None if none."""

    def ids() -> Iterator[tuple[str, str]]:
        for f, _, _ in stamp:
            for n, raw in iter_rows(Path(f)):
                if isinstance(raw, dict) and raw.get("id") not in (None, ""):
                    yield str(raw["id"]), f"{f}:{n}"

    return duplicate_ids(ids())


def check_unique_ids(path: Path) -> None:
    """Raise DataError when two rows carry the same case id (their results would merge in the summaries)."""
    dup = _duplicates(str(path), _stamp(path))
    if dup:
        raise DataError(f"{path}: {dup}")


def _stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for f in data_files(path):
        st = f.stat()
        out.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(out)


def count_cases(path: Path) -> int:
    """Rows in a data file or folder (bad rows included: they fail their shard, loudly, not the plan).
    Repeated case ids raise DataError: they fail the plan. So does data without a row: a task of no case would
    plan one empty shard, an infra_error retried on every try (``toolcalls task``, the plan and ``tasks
    validate`` all count through here)."""
    stamp = _stamp(path)
    check_unique_ids(path)
    rows = _count(str(path), stamp)
    if rows == 0:
        raise DataError(f"{path}: no rows (blank lines do not count); a toolcall task needs at least one case")
    return rows


def shard_count(rows: int, size: int) -> int:
    return max(1, -(-rows // size))


def load_shard(path: Path, shard: int, size: int) -> list[Case]:
    """The cases of one shard; a bad row raises DataError naming the file, row and field."""
    start, stop = shard * size, (shard + 1) * size
    out: list[Case] = []
    seen = 0
    for f in data_files(path):
        label = f.name if path.is_file() else str(f.relative_to(path))
        if _jsonl(f):
            rows = _jsonl_rows(f, start - seen, stop - seen)
        else:
            rows = [(n, raw) for n, raw in iter_rows(f) if start <= seen + n - 1 < stop]
        for n, raw in rows:
            try:
                out.append(checked_row(raw, f"{label}:{n}", f"{f}:{n}", require_label=False))
            except RowError as exc:
                raise DataError(f"{f}: row {n}: field '{exc.field}': {exc}") from None
        if len(out) >= stop - start:
            break
        seen += _rows_in(f)
    dup = duplicate_ids((c.id, c.source or c.id) for c in out)
    if dup:
        raise DataError(f"{path}: {dup}")
    return out


def _jsonl_rows(path: Path, start: int, stop: int) -> list[tuple[int, object]]:
    """Rows ``[start, stop)`` (0-based over non-blank lines) of a JSONL file, decoding only those."""
    out: list[tuple[int, object]] = []
    if stop <= 0:
        return out
    for n, line in jsonl_lines(path):
        if start < n <= stop:
            out.append((n, decode_line(line)))
        if n >= stop:
            break
    return out
