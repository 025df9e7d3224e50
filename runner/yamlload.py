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


class YAMLLimitError(ValueError):
    """The document is too large (in bytes or once its aliases are expanded) or too deeply nested."""


def expanded_nodes(value: Any, budget: int = MAX_NODES) -> int:
    """Nodes in ``value`` with every shared (aliased) object counted each time it appears; stops past
    ``budget`` (raising YAMLLimitError), so a billion laughs costs at most ``budget`` steps."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        count += 1
        if count > budget:
            raise YAMLLimitError(
                f"the document expands to more than {budget:,} values (nested aliases, a 'billion laughs'?); "
                "write it without YAML anchors/aliases"
            )
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
    budget = max_nodes
    for doc in docs:
        budget -= expanded_nodes(doc, budget)
    return docs


def load_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> list[Any]:
    """``load_all`` of a file, reading at most ``max_bytes + 1`` bytes of it (a huge file is not read whole).
    Raises OSError, UnicodeDecodeError, yaml.YAMLError or YAMLLimitError."""
    with open(path, "rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise YAMLLimitError(f"the file is larger than {max_bytes:,} bytes; at most {max_bytes:,} are read")
    return load_all(raw.decode("utf-8"), max_bytes)
