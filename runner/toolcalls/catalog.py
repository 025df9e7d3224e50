"""The generator's tool catalog: real and hand-written MCP servers, each tool with its request scenarios.

data/mcp_filesystem_tools.json is the pinned filesystem server's ``tools/list`` (scripts/dump_tool_schemas.py
regenerates it), with requests in data/filesystem_scenarios.yaml; data/handwritten_tools.yaml holds the
hand-written servers. Loading checks every scenario (known slot kinds, no undefined slot) so a typo in the
data fails at once, not as an odd case thousands of rows later.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from mcpfleet.runner.toolcalls.models import Tool
from mcpfleet.runner.toolcalls.slots import check_kind

DATA = Path(__file__).resolve().parent / "data"
FILESYSTEM_TOOLS = DATA / "mcp_filesystem_tools.json"
FILESYSTEM_SCENARIOS = DATA / "filesystem_scenarios.yaml"
HANDWRITTEN = DATA / "handwritten_tools.yaml"
#: ``{slot}`` or ``{slot.attr}`` in a request or an argument template.
SLOT_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?\}")


class CatalogError(ValueError):
    """The generator's data files are inconsistent; the message names the tool and the problem."""


@dataclass(frozen=True)
class Scenario:
    slots: dict[str, str]  # slot name -> kind, in drawing order
    requests: tuple[str, ...]
    args: Any  # argument template


@dataclass(frozen=True)
class ToolSpec:
    tool: Tool
    server: str
    scenarios: tuple[Scenario, ...]
    equivalent: frozenset[str] = frozenset()


@dataclass
class Server:
    name: str
    specs: list[ToolSpec] = field(default_factory=list)

    @property
    def tools(self) -> list[Tool]:
        return [s.tool for s in self.specs]


def _refs(template: Any) -> set[str]:
    if isinstance(template, str):
        return {m.group(1) for m in SLOT_REF.finditer(template)}
    if isinstance(template, dict):
        return set().union(*(_refs(v) for v in template.values())) if template else set()
    if isinstance(template, list):
        return set().union(*(_refs(v) for v in template)) if template else set()
    return set()


def _scenario(raw: dict[str, Any], where: str) -> Scenario:
    slots = {str(k): str(v) for k, v in (raw.get("slots") or {}).items()}
    requests = tuple(raw.get("requests") or ())
    if not requests:
        raise CatalogError(f"{where}: a scenario needs at least one request")
    for kind in slots.values():
        try:
            check_kind(kind)
        except ValueError as exc:
            raise CatalogError(f"{where}: {exc}") from None
    args = raw.get("args", {})
    used = _refs(args).union(*(_refs(r) for r in requests))
    if used - slots.keys():
        raise CatalogError(f"{where}: undefined slot(s) {sorted(used - slots.keys())}")
    return Scenario(slots, requests, args)


def _spec(tool: Tool, server: str, raw: dict[str, Any]) -> ToolSpec:
    scenarios = tuple(_scenario(s, f"{server}/{tool.name}") for s in raw.get("scenarios") or ())
    if not scenarios:
        raise CatalogError(f"{server}/{tool.name}: no scenarios")
    return ToolSpec(tool, server, scenarios, frozenset(raw.get("equivalent") or ()))


@lru_cache(maxsize=1)
def load_catalog() -> tuple[Server, ...]:
    """Every server the generator draws from: the real filesystem server first, then the hand-written ones."""
    dumped = json.loads(FILESYSTEM_TOOLS.read_text(encoding="utf-8"))
    scenarios = yaml.safe_load(FILESYSTEM_SCENARIOS.read_text(encoding="utf-8"))
    fs = Server(str(dumped["server"]))
    for t in dumped["tools"]:
        if t["name"] not in scenarios:
            raise CatalogError(f"{FILESYSTEM_SCENARIOS.name}: no scenarios for the server's tool '{t['name']}'")
        fs.specs.append(_spec(Tool(**t), fs.name, scenarios[t["name"]]))
    servers = [fs]
    for raw_server in yaml.safe_load(HANDWRITTEN.read_text(encoding="utf-8"))["servers"]:
        server = Server(raw_server["name"])
        for raw in raw_server["tools"]:
            tool = Tool(name=raw["name"], description=raw.get("description", ""), input_schema=raw["input_schema"])
            server.specs.append(_spec(tool, server.name, raw))
        servers.append(server)
    names = [s.tool.name for srv in servers for s in srv.specs]
    if len(names) != len(set(names)):
        raise CatalogError(
            f"tool names must be unique across servers: {sorted({n for n in names if names.count(n) > 1})}"
        )
    return tuple(servers)
