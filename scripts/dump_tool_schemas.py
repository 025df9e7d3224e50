"""Regenerate runner/toolcalls/data/mcp_filesystem_tools.json: the pinned filesystem server's ``tools/list``.

The tool-call generator builds its cases on real MCP schemas; this dumps them from the server mcpfleet runs
(servers/node_modules, pinned by servers/package-lock.json) so the checked-in file can be regenerated after
a version bump. Run: .venv/bin/python scripts/dump_tool_schemas.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from mcpfleet.runner.environment.mcp_client import connect_stdio
from mcpfleet.runner.services import get_service

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "runner" / "toolcalls" / "data" / "mcp_filesystem_tools.json"
PACKAGE = "@modelcontextprotocol/server-filesystem"


def pinned_version() -> str:
    lock = json.loads((REPO / "servers" / "package-lock.json").read_text(encoding="utf-8"))
    return str(lock["packages"][f"node_modules/{PACKAGE}"]["version"])


async def dump() -> dict[str, object]:
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryFile() as errlog:
        cmd = get_service("filesystem").server_command(Path(root))
        async with connect_stdio(cmd, errlog) as session:
            listed = await session.list_tools()
    tools = [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema} for t in listed.tools]
    return {"server": "filesystem", "package": PACKAGE, "version": pinned_version(), "tools": tools}


def main() -> None:
    data = asyncio.run(dump())
    OUT.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(data['tools'])} tools from {PACKAGE} {data['version']}", file=sys.stderr)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
