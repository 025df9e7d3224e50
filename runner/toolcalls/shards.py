"""A toolcall task's cases and their shards: where the data is, how many rows, and one shard's rows.

A toolcall task folder holds limbic-format data as ``cases.jsonl`` / ``cases.json`` / ``cases.parquet`` or a
``cases/`` folder of such files. Shard ``i`` of size ``n`` is rows ``[i*n, (i+1)*n)`` in file order. A shard
reads only its own rows' JSON from a JSONL file (the others are counted, not decoded), so 40 shards of a
10,000-row file do not each parse 10,000 rows.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .loader import DataError, RowError, data_files, iter_rows, parse_row
from .models import Case

CASE_NAMES = ("cases.jsonl", "cases.ndjson", "cases.json", "cases.parquet", "cases")


def cases_path(task_dir: Path) -> Path | None:
    """The task's data file or folder, or None when it has none."""
    return next((task_dir / n for n in CASE_NAMES if (task_dir / n).exists()), None)


def _jsonl(path: Path) -> bool:
    return path.suffix.lower() in (".jsonl", ".ndjson")


def _rows_in(path: Path) -> int:
    if _jsonl(path):
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
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


def _stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for f in data_files(path):
        st = f.stat()
        out.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(out)


def count_cases(path: Path) -> int:
    """Rows in a data file or folder (bad rows included: they fail their shard, loudly, not the plan)."""
    return _count(str(path), _stamp(path))


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
                if isinstance(raw, RowError):
                    raise raw
                out.append(parse_row(raw, f"{label}:{n}", f"{f}:{n}", require_label=False))
            except RowError as exc:
                raise DataError(f"{f}: row {n}: field '{exc.field}': {exc}") from None
        if len(out) >= stop - start:
            break
        seen += _rows_in(f)
    return out


def _jsonl_rows(path: Path, start: int, stop: int) -> list[tuple[int, object]]:
    """Rows ``[start, stop)`` (0-based over non-blank lines) of a JSONL file, decoding only those."""
    out: list[tuple[int, object]] = []
    if stop <= 0:
        return out
    n = 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            if start <= n < stop:
                try:
                    out.append((n + 1, json.loads(line)))
                except json.JSONDecodeError as exc:
                    out.append((n + 1, RowError("(row)", f"not valid JSON: {exc}")))
            n += 1
            if n >= stop:
                break
    return out
