"""YAML read with limits: a small file must not expand into a huge document or hang the loader.

PyYAML's safe loader shares aliased nodes, so a "billion laughs" file loads fast but becomes gigabytes as
soon as anything serialises it (run.json, the CRD's status). We count the nodes a document would have once
every alias is expanded and refuse it past a budget far above any real EvalRun.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 1024 * 1024  # the Kubernetes API server refuses objects much above this anyway
MAX_NODES = 100_000  # an EvalRun with 1,000 models and include patterns stays well below
MAX_INT_DIGITS = 4_300  # Python's int <-> text conversion limit (sys.get_int_max_str_digits())
MAX_INT = 10**MAX_INT_DIGITS
FIFO_WRITER_WAIT = 1.0  # seconds an EvalRun path that is a named pipe may wait for a writer


def _yaml11_only(text: str, value: float) -> str | None:
    """Why a number is refused when YAML 1.1 (PyYAML's reading) and YAML 1.2 read it apart:
    ``010`` is octal 8 in 1.1 and 10 in 1.2; ``1:30`` is base-60 90 in 1.1 and text in 1.2. Such a number
    (``attempts: 010``, ``timeoutSeconds: 1:30``) silently ran another experiment than the one written.
    Refused rather than read either way: the writer meant one of the two. Hex (``0x10``) is alike in both."""
    digits = text.replace("_", "").lstrip("+-")
    shown = value if isinstance(value, int) else f"{value:g}"
    if ":" in digits:
        return (
            f"'{text}' is a base-60 number in YAML 1.1 ({shown}) but text in YAML 1.2; write the number itself "
            "(or quote it to give it as text)"
        )
    octal = len(digits) > 1 and digits[0] == "0" and digits.isdigit()
    if octal and value != int(text.replace("_", ""), 10):  # (`07` is 7 in both)
        return (
            f"'{text}' is octal in YAML 1.1 ({shown}) but {int(text.replace('_', ''), 10)} in YAML 1.2; write it "
            "without the leading zero (or quote it to give it as text)"
        )
    return None


def _key_text(key: Any) -> Any:
    """A mapping key as JSON (and so the API server, and the spec's ``dict[str, ...]`` fields) reads it:
    ``1`` and ``"1"`` are the same key there, and a spec holding both kept one of them without a word."""
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    if isinstance(key, int | float):
        return str(key)
    return key


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key given twice in one mapping: PyYAML keeps the last silently, so a typo'd
    copy (``attempts: 5`` ... ``attempts: 1``) ran another experiment than the one the reader saw. Keys that
    JSON writes alike count as one (``1`` and ``"1"``). A key given after a ``<<`` merge still overrides the
    merged one, as YAML says."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = _key_text(self.construct_object(key_node, deep=True))
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: the base loader says so
                continue
            if first is not key_node.start_mark:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found the key '{key}' twice (first on line {first.line + 1}); keep one",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An int, refused (naming its line) past 4,300 digits: Python cannot turn such an int into text (it
        raises a ValueError from json.dumps or str()), and no field of an EvalRun takes one. Hex and base-60
        forms are parsed without that limit, so the size is checked on the value, not the text."""
        try:
            value: int = super().construct_yaml_int(node)
        except ValueError:
            value = MAX_INT  # a decimal of too many digits: int() refuses it
        if abs(value) >= MAX_INT:
            raise yaml.constructor.ConstructorError(
                None, None, f"a number with more than {MAX_INT_DIGITS:,} digits; no field takes one", node.start_mark
            )
        if why := _yaml11_only(str(node.value), value):
            raise yaml.constructor.ConstructorError(None, None, why, node.start_mark)
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        """A float, refused in YAML 1.1's base-60 form (``1:30.5`` is 90.5 there, text in YAML 1.2)."""
        value: float = super().construct_yaml_float(node)
        if why := _yaml11_only(str(node.value), value):
            raise yaml.constructor.ConstructorError(None, None, why, node.start_mark)
        return value

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        """A date or time, refused (naming its line) when it is no real one (``2024-13-45``): the base loader
        raises a plain ValueError."""
        try:
            return super().construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid date or time ({exc}); quote it to give it as text", node.start_mark
            ) from None


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_yaml_float)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", _UniqueKeyLoader.construct_yaml_timestamp)


class YAMLLimitError(ValueError):
    """The document is too large (in bytes or once its aliases are expanded) or too deeply nested."""


def _expanded_message(limit: int) -> str:
    return (
        f"the document expands to more than {limit:,} values (nested aliases, a 'billion laughs'?); "
        "write it without YAML anchors/aliases"
    )


def expanded_nodes(value: Any, budget: int = MAX_NODES) -> int:
    """Nodes in ``value`` with every shared (aliased) object counted each time it appears; stops past
    ``budget`` (raising YAMLLimitError), so a billion laughs costs at most ``budget`` steps."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        count += 1
        if count > budget:
            raise YAMLLimitError(_expanded_message(budget))
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return count


def load_all(text: str, max_bytes: int = MAX_FILE_BYTES, max_nodes: int = MAX_NODES) -> list[Any]:
    """Every document of a YAML stream (safe loader), refused when over the limits; None documents dropped."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise YAMLLimitError(f"the file is {size:,} bytes; at most {max_bytes:,} are read")
    try:
        docs = [d for d in yaml.load_all(text, Loader=_UniqueKeyLoader) if d is not None]  # noqa: S506 - safe
    except RecursionError:
        raise YAMLLimitError("the document is nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # a value the loader cannot build (its constructors above name most)
        raise YAMLLimitError(f"a value YAML cannot convert: {str(exc)[:200]}") from None
    budget = max_nodes
    for doc in docs:
        try:
            budget -= expanded_nodes(doc, budget)
        except YAMLLimitError:  # say the whole limit, not what the documents before this one left of it
            raise YAMLLimitError(_expanded_message(max_nodes)) from None
    return docs


def _first_byte(fd: int, wait: float) -> bytes | None:
    """The first byte of a pipe opened without blocking; None when a writer holds it with nothing written yet
    (then read on blocking, as a shell would); b"" when no writer came within ``wait`` seconds (one blocked in
    its own open() until a reader came, as ``echo x > fifo`` is, arrives a moment after our open)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            first = os.read(fd, 1)  # b"" at once while no process holds the pipe open for writing
        except BlockingIOError:
            return None
        if first or time.monotonic() >= deadline:
            return first
        time.sleep(0.02)


def load_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> list[Any]:
    """``load_all`` of a file, reading at most ``max_bytes + 1`` bytes of it (a huge file is not read whole).
    Opened without blocking: a named pipe nothing writes to (``mkfifo``) hung ``validate`` and ``run`` for ever
    in open(); one a writer holds (``<(...)``, a piped ``/dev/stdin``) is still read to its end.
    Raises OSError, UnicodeDecodeError, yaml.YAMLError or YAMLLimitError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        fifo = stat.S_ISFIFO(os.fstat(fd).st_mode)
        if fifo:
            first = _first_byte(fd, FIFO_WRITER_WAIT)
            if first == b"":
                raise OSError(
                    errno.EINVAL,
                    f"a named pipe that nothing wrote to within {FIFO_WRITER_WAIT:g} s; give the EvalRun file itself",
                )
            os.set_blocking(fd, True)
            raw = (first or b"") + f.read(max_bytes + 1 - len(first or b""))
        else:
            os.set_blocking(fd, True)
            raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise YAMLLimitError(f"the file is larger than {max_bytes:,} bytes; at most {max_bytes:,} are read")
    return load_all(raw.decode("utf-8"), max_bytes)
