"""Read limbic-format tool-call data (JSONL, JSON, Parquet; a file or a folder of them) into Cases.

A row holds ``available_tools``, ``message_history`` (the request, then the assistant message whose
``tool_calls`` hold the call), ``score`` and ``failure_reason``, as Quotient published them. Tolerated: both
lists as JSON-encoded strings, ``arguments`` as an object or a JSON string, tools in MCP's shape
(``input_schema``/``inputSchema``) or OpenAI's (``parameters``, optionally inside ``{"type": "function",
"function": ...}``), calls as OpenAI ``function`` objects, flat ``{name, arguments}`` or Anthropic
``tool_use`` content blocks. A bad row raises DataError naming the file, the row (1-based) and the field;
with ``skip_bad`` it is skipped and listed in the result instead. Nothing is dropped silently. A UTF-8 byte
order mark at the start of a file is accepted. Tool names must be unique within a row.

The conversation before the call is kept as the data gives it (what the judge sees and its cache key), and
must convert to a valid OpenAI conversation (``openai_history``), which is what the model under test gets:
a history that cannot is a bad row, never a scored failure of the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mcpfleet.runner.toolcalls.models import LABELS, Case, Tool, ToolCall

SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet")
LABEL_KEYS = ("score", "label")


class DataError(ValueError):
    """A file or row that cannot be read; the message names the file, row and field."""


class RowError(ValueError):
    """A problem inside one row; ``field`` is a path such as ``message_history[1].tool_calls[0]``."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(message)
        self.field = field_path


@dataclass
class BadRow:
    file: str
    row: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: row {self.row}: field '{self.field}': {self.message}"


@dataclass
class Loaded:
    cases: list[Case]
    files: list[str]
    rows: int
    skipped: list[BadRow] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ files


def data_files(path: Path) -> list[Path]:
    """The file itself, or every data file under a folder (recursively, sorted). As in Spark and Parquet data
    sets, names starting with ``_`` or ``.`` are not data (a generated set's ``_manifest.json``)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and p.suffix.lower() in SUFFIXES
            and not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
        )
        if not found:
            raise DataError(f"{path}: no {', '.join(SUFFIXES)} files in this folder")
        return found
    raise DataError(f"{path}: no such file or folder")


def iter_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(1-based row number, raw row) for one file; a row that is not JSON is passed on as a RowError."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        for n, line in jsonl_lines(path):
            yield n, decode_line(line)
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not valid UTF-8: {exc}") from None
        except RecursionError:
            raise DataError(f"{path}: not readable JSON: nested too deeply") from None
        except ValueError as exc:  # JSONDecodeError, or an integer with too many digits
            raise DataError(f"{path}: not valid JSON: {exc}") from None
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise DataError(f'{path}: expected a JSON list of rows or {{"data": [...]}}')
        yield from enumerate(data, 1)
    elif suffix == ".parquet":
        yield from _parquet_rows(path)
    else:
        raise DataError(f"{path}: unknown data file type '{suffix}'; expected one of {', '.join(SUFFIXES)}")


def jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based row number, line) for every non-blank line of a JSONL file: the one rule both the row count
    and the readers use (universal newlines, ``str.strip()``). Bytes that are not UTF-8 are kept as
    surrogates (``decode_line`` turns such a row into a RowError), so one bad row does not end the file."""
    with path.open(encoding="utf-8-sig", errors="surrogateescape") as fh:
        n = 0
        for line in fh:
            if not line.strip():
                continue
            n += 1
            yield n, line


def decode_line(line: str) -> Any:
    """One JSONL row decoded, or a RowError saying why it cannot be (never raises)."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        return RowError("(row)", f"not valid UTF-8 (at character {exc.start})")
    try:
        return json.loads(line)
    except RecursionError:
        return RowError("(row)", "not readable JSON: nested too deeply")
    except ValueError as exc:  # JSONDecodeError, or an integer with too many digits
        return RowError("(row)", f"not valid JSON: {exc}")


def checked_row(raw: Any, row_id: str, source: str, require_label: bool) -> Case:
    """``parse_row`` with anything a hostile row can raise (deep nesting, huge numbers) as a RowError."""
    if isinstance(raw, RowError):
        raise raw
    try:
        return parse_row(raw, row_id, source, require_label)
    except RowError:
        raise
    except RecursionError:
        raise RowError("(row)", "nested too deeply") from None
    except ValueError as exc:
        raise RowError("(row)", str(exc)) from None


def duplicate_ids(ids: Iterable[tuple[str, str]]) -> str | None:
    """A message naming the first repeated case id and the rows holding it (``(id, where)`` pairs), or None."""
    first: dict[str, list[str]] = {}
    for case_id, where in ids:
        first.setdefault(case_id, []).append(where)
    dup = next(((k, v) for k, v in first.items() if len(v) > 1), None)
    if dup is None:
        return None
    more = sum(1 for v in first.values() if len(v) > 1) - 1
    return (
        f"case id '{dup[0]}' appears in {len(dup[1])} rows ({', '.join(dup[1][:5])})"
        + (f" and {more} other id(s) repeat too" if more else "")
        + "; case ids must be unique"
    )


def _parquet_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow: pip install 'mcpfleet[parquet]'") from None
    try:
        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                n += 1
                yield n, row
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise DataError(f"{path}: not a readable Parquet file: {exc}") from None


# ------------------------------------------------------------------------------------------------ rows


def _decoded(value: Any, field_path: str) -> Any:
    """A JSON-encoded string decoded; any other value as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowError(field_path, f"a string that is not valid JSON: {exc}") from None
    return value


def parse_tool(raw: Any, where: str) -> Tool:
    if not isinstance(raw, dict):
        raise RowError(where, f"expected a tool object, got {type(raw).__name__}")
    if isinstance(raw.get("function"), dict):  # OpenAI: {"type": "function", "function": {...}}
        raw, where = raw["function"], f"{where}.function"
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise RowError(f"{where}.name", "missing or not a non-empty string")
    schema_key = next((k for k in ("input_schema", "inputSchema", "parameters") if k in raw), None)
    schema: Any = {"type": "object", "properties": {}}
    if schema_key is not None and raw[schema_key] is not None:
        schema = _decoded(raw[schema_key], f"{where}.{schema_key}")
    if not isinstance(schema, dict):
        raise RowError(f"{where}.{schema_key}", f"expected a JSON schema object, got {type(schema).__name__}")
    description = raw.get("description")
    return Tool(name=name, description=description if isinstance(description, str) else "", input_schema=schema)


def _call_from(raw: Any, where: str) -> ToolCall:
    if not isinstance(raw, dict):
        raise RowError(where, f"expected a tool call object, got {type(raw).__name__}")
    fn, fn_where = raw, where
    if isinstance(raw.get("function"), dict):
        fn, fn_where = raw["function"], f"{where}.function"
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise RowError(f"{fn_where}.name", "missing or not a non-empty string")
    key = "input" if raw.get("type") == "tool_use" else "arguments"
    arguments = _decoded(fn.get(key, {}), f"{fn_where}.{key}")
    if arguments is None:
        arguments = {}
    call_id = raw.get("id")
    return ToolCall(name=name, arguments=arguments, id=call_id if isinstance(call_id, str) else None)


def _message_calls(message: dict[str, Any], where: str) -> list[ToolCall]:
    """The calls an assistant message makes: OpenAI ``tool_calls`` or Anthropic ``tool_use`` blocks."""
    raw_calls = _decoded(message.get("tool_calls"), f"{where}.tool_calls")
    if raw_calls:
        if not isinstance(raw_calls, list):
            raise RowError(f"{where}.tool_calls", f"expected a list, got {type(raw_calls).__name__}")
        return [_call_from(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(raw_calls)]
    content = message.get("content")
    if isinstance(content, list):
        return [
            _call_from(b, f"{where}.content[{i}]")
            for i, b in enumerate(content)
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
    return []


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content or None
    if isinstance(content, list):
        text = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        return text or None
    return None


def _result_text(content: Any) -> str:
    """A tool result's content as the string OpenAI's ``tool`` message takes."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "".join(str(b.get("text", "")) for b in content)
    return json.dumps(content, ensure_ascii=False)


def openai_history(history: list[dict[str, Any]], where: str = "message_history") -> list[dict[str, Any]]:
    """The conversation as a strict OpenAI-compatible provider accepts it: every earlier tool call in an
    assistant ``tool_calls`` entry with an id unique in the conversation (given one like ``llm.reply_of``
    does when it has none, or a repeated one) and its arguments JSON-encoded as a string, every tool result a
    ``tool`` message right after its call's message, answering it by id (Anthropic ``tool_use`` and
    ``tool_result`` blocks converted; a result without an id answers the first unanswered call). Messages
    without tool calls or results are passed on as they are. Raises RowError naming the message that cannot be
    converted: a result that answers no call, or a call left without a result."""
    out: list[dict[str, Any]] = []
    used: set[str] = set()
    pending: list[tuple[str | None, str, str]] = []  # (id in the data, id sent, where the call is)

    def fresh() -> str:
        n = len(used)
        while (cid := f"call_mcpfleet_{n}") in used:
            n += 1
        return cid

    def answer(call_id: Any, content: Any, at: str) -> None:
        if isinstance(call_id, str) and call_id:
            match = next((p for p in pending if p[0] == call_id), None)
            if match is None:
                raise RowError(at, f"a tool result for '{call_id}', which no unanswered tool call before it has")
        elif pending:
            match = pending[0]
        else:
            raise RowError(at, "a tool result that answers no tool call")
        pending.remove(match)
        out.append({"role": "tool", "tool_call_id": match[1], "content": _result_text(content)})

    def all_answered() -> None:
        if pending:
            raise RowError(pending[0][2], "a tool call with no tool result after it")

    for i, m in enumerate(history):
        at = f"{where}[{i}]"
        role, content = m.get("role"), m.get("content")
        if role == "tool":
            answer(m.get("tool_call_id"), content, at)
            continue
        if role == "user" and isinstance(content, list):
            results = [(j, b) for j, b in enumerate(content) if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                for j, b in results:
                    answer(b.get("tool_use_id"), b.get("content"), f"{at}.content[{j}]")
                rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
                if rest:
                    all_answered()
                    out.append({**m, "content": rest})
                continue
        all_answered()
        calls = _message_calls(m, at) if role == "assistant" else []
        if not calls:
            out.append(m)
            continue
        wire = []
        for c in calls:
            cid = c.id if c.id and c.id not in used else fresh()
            used.add(cid)
            pending.append((c.id, cid, at))
            arguments = json.dumps(c.arguments, ensure_ascii=False)
            wire.append({"id": cid, "type": "function", "function": {"name": c.name, "arguments": arguments}})
        out.append({"role": "assistant", "content": _text_of(content), "tool_calls": wire})
    all_answered()
    return out


def parse_row(raw: Any, row_id: str, source: str, require_label: bool = True) -> Case:
    """One limbic row -> Case; raises RowError naming the field."""
    if not isinstance(raw, dict):
        raise RowError("(row)", f"expected an object, got {type(raw).__name__}")
    if "available_tools" not in raw:
        raise RowError("available_tools", "missing")
    tools_raw = _decoded(raw["available_tools"], "available_tools")
    if not isinstance(tools_raw, list):
        raise RowError("available_tools", f"expected a list of tools, got {type(tools_raw).__name__}")
    tools = [parse_tool(t, f"available_tools[{i}]") for i, t in enumerate(tools_raw)]
    first: dict[str, int] = {}
    for i, t in enumerate(tools):
        j = first.setdefault(t.name, i)
        if j != i:  # the checker, the gold rule and a strict provider could not tell the two apart
            raise RowError(f"available_tools[{i}].name", f"repeats tool '{t.name}' (also at available_tools[{j}])")
    if "message_history" not in raw:
        raise RowError("message_history", "missing")
    history = _decoded(raw["message_history"], "message_history")
    if not isinstance(history, list) or not history:
        raise RowError("message_history", "expected a non-empty list of messages")
    for i, m in enumerate(history):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise RowError(f"message_history[{i}]", "expected a message object with a 'role'")
    # The call under judgement: the last assistant message that makes calls; it must make exactly one.
    at = next((i for i in range(len(history) - 1, -1, -1) if history[i]["role"] == "assistant"), None)
    calls = _message_calls(history[at], f"message_history[{at}]") if at is not None else []
    if at is None or not calls:
        raise RowError("message_history", "no assistant message with a tool call (tool_calls or tool_use)")
    if len(calls) != 1:
        raise RowError(f"message_history[{at}].tool_calls", f"expected exactly one tool call, found {len(calls)}")
    openai_history(history[:at])  # the model's conversation must be one a provider accepts
    label = next((raw[k] for k in LABEL_KEYS if raw.get(k) not in (None, "")), None)
    if label is None and require_label:
        raise RowError("score", f"missing; expected one of {', '.join(LABELS)}")
    if label is not None and label not in LABELS:
        raise RowError("score", f"{label!r} is not one of {', '.join(LABELS)}")
    reason = raw.get("failure_reason")
    case_id = raw.get("id")
    mutation = raw.get("mutation")
    try:
        return Case(
            id=str(case_id) if case_id not in (None, "") else row_id,
            tools=tools,
            history=history[:at],
            call=calls[0],
            call_content=_text_of(history[at].get("content")),
            label=label,
            failure_reason=reason if isinstance(reason, str) and reason else None,
            mutation=mutation if isinstance(mutation, str) else None,
            source=source,
        )
    except ValidationError as exc:  # defensive: every field was checked above
        raise RowError("(row)", str(exc)) from None


def load_cases(path: Path | str, skip_bad: bool = False, require_label: bool = True) -> Loaded:
    """Every case in a file or folder. A bad row raises DataError unless ``skip_bad`` (then it is listed)."""
    root = Path(path)
    files = data_files(root)
    out = Loaded(cases=[], files=[str(f) for f in files], rows=0)
    interned: dict[tuple[str, str, str], Tool] = {}  # one Tool object per distinct tool: compiled once
    for f in files:
        label = f.name if root.is_file() else str(f.relative_to(root))
        for n, raw in iter_rows(f):
            out.rows += 1
            try:
                case = checked_row(raw, f"{label}:{n}", f"{f}:{n}", require_label)
            except RowError as exc:
                bad = BadRow(str(f), n, exc.field, str(exc))
                if not skip_bad:
                    raise DataError(f"{bad} (use --skip-bad to skip and count bad rows)") from None
                out.skipped.append(bad)
                continue
            case.tools = [interned.setdefault((t.name, t.description, t.key), t) for t in case.tools]
            out.cases.append(case)
    dup = duplicate_ids((c.id, c.source or c.id) for c in out.cases)
    if dup:
        raise DataError(f"{root}: {dup}")
    return out
