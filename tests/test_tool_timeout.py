"""A tool call past its timeout is abandoned, not cancelled, as under MCPMark's agents: its client (mcp 1.12)
sends no ``notifications/cancelled``, so the server finishes the call (a PostgreSQL statement commits) while
the model reads that it timed out. A cancelled call is rolled back instead, and the end state differs."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from mcpfleet.runner import mcp_client
from mcpfleet.runner.agent import ToolCallRecord, TurnRecord, _call_tool_as_mcpmark
from mcpfleet.runner.call_classes import CallClassifier
from mcpfleet.runner.conversation import MCPMARK
from mcpfleet.runner.mcp_client import call_tool_abandoning, connect_stdio
from mcpfleet.runner.react_agent import _act
from mcpfleet.runner.services import ServerCommand

SLOW_SERVER = """
import anyio
from pathlib import Path
from mcp.server.mcpserver import MCPServer

app = MCPServer("slow")


@app.tool()
async def slow_mark(path: str, seconds: float) -> str:
    await anyio.sleep(seconds)
    Path(path).write_text("done")
    return "marked"


@app.tool()
def ping() -> str:
    return "pong"


app.run()
"""


def server(tmp_path: Path) -> ServerCommand:
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SERVER)
    return ServerCommand(sys.executable, [str(script)], {})


async def test_a_timed_out_call_is_abandoned_and_the_server_finishes_it(tmp_path: Path) -> None:
    with open(tmp_path / "server.log", "wb") as log:
        async with connect_stdio(server(tmp_path), log) as session:
            # The control: a call cancelled at its timeout (the SDK's default) is stopped by this server.
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await session.call_tool("slow_mark", {"path": str(tmp_path / "cancelled"), "seconds": 0.6})
            started = time.perf_counter()
            with pytest.raises(TimeoutError):
                await call_tool_abandoning(
                    session, "slow_mark", {"path": str(tmp_path / "abandoned"), "seconds": 0.6}, 0.2
                )
            assert time.perf_counter() - started < 0.5  # the model is not kept waiting past the timeout
            assert len(mcp_client._abandoned) == 1
            pong = await session.call_tool("ping", {})  # the session serves the next call meanwhile
            assert pong.content[0].text == "pong"  # type: ignore[union-attr]
            await asyncio.sleep(1.0)
            assert (tmp_path / "abandoned").read_text() == "done"
            assert not (tmp_path / "cancelled").exists()
            assert not mcp_client._abandoned
            # A call still running when the agent ends is stopped then (MCPMark stops its server), before the
            # verifier reads the end state; only that session's calls are.
            with pytest.raises(TimeoutError):
                await call_tool_abandoning(session, "slow_mark", {"path": str(tmp_path / "late"), "seconds": 1}, 0.1)
            assert await mcp_client.end_abandoned(object()) == 0 and len(mcp_client._abandoned) == 1
            assert await mcp_client.end_abandoned(session) == 1 and not mcp_client._abandoned
            await asyncio.sleep(1.3)
            assert not (tmp_path / "late").exists()
            # A call still running when the session closes ends with it.
            with pytest.raises(TimeoutError):
                await call_tool_abandoning(session, "slow_mark", {"path": str(tmp_path / "last"), "seconds": 30}, 0.1)
    for _ in range(40):
        if not mcp_client._abandoned:
            break
        await asyncio.sleep(0.05)
    assert not mcp_client._abandoned and not (tmp_path / "last").exists()


async def test_mcpmarks_agent_and_its_react_agent_both_abandon(tmp_path: Path) -> None:
    """Both agents read the timeout text MCPMark writes, and the server's work still lands."""
    with open(tmp_path / "server.log", "wb") as log:
        async with connect_stdio(server(tmp_path), log) as session:
            listed = (await session.list_tools()).tools
            known = [t.name for t in listed]
            args = {"path": str(tmp_path / "agent"), "seconds": 0.5}
            rec = ToolCallRecord(name="slow_mark", call_id="c1", arguments=json.dumps(args))
            text = await _call_tool_as_mcpmark(session, set(known), "slow_mark", json.dumps(args), 0.1, MCPMARK, rec)
            assert text == MCPMARK.tool_timed_out("slow_mark", 0.1) and rec.is_error
            turn = TurnRecord(index=1)
            action = {"tool": "slow_mark", "arguments": {"path": str(tmp_path / "react"), "seconds": 0.5}}
            observed = await _act(session, known, action, 0.1, turn, CallClassifier(listed))
            assert "slow_mark" in observed and "tim" in observed.lower() and turn.tool_calls[0].is_error
            await asyncio.sleep(1.0)
            assert (tmp_path / "agent").read_text() == (tmp_path / "react").read_text() == "done"
