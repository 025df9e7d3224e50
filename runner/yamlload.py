"""YAML read with limits: a small file must not expand into a huge document or hang the loader.

PyYAML's safe loader shares aliased nodes, so a "billion laughs" file loads fast but becomes gigabytes as
soon as anything serialises it (run.json, the CRD's status). We count the nodes a document would have once
every alias is expanded and refuse it past a budget far above any real EvalRun.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 1024 * 1024  # the Kubernetes API server refuses objects much above this anyway
MAX_NODES = 100_000  # an EvalRun with 1,000 models and include patterns stays well below
MAX_INT_DIGITS = 4_300  # Python's int <-> text conversion limit (sys.get_int_max_str_digits())
MAX_INT = 10**MAX_INT_DIGITS


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key given twice in one mapping: PyYAML keeps the last silently, so a typo'd
    copy (``attempts: 5`` ... ``attempts: 1``) ran another experiment than the one the reader saw. A key given
    after a ``<<`` merge still overrides the merged one, as YAML says."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
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


def load_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> list[Any]:
    """``load_all`` of a file, reading at most ``max_bytes + 1`` bytes of it (a huge file is not read whole).
    Raises OSError, UnicodeDecodeError, yaml.YAMLError or YAMLLimitError."""
    with open(path, "rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise YAMLLimitError(f"the file is larger than {max_bytes:,} bytes; at most {max_bytes:,} are read")
    return load_all(raw.decode("utf-8"), max_bytes)
