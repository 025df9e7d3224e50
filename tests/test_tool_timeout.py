"""A tool call past its timeout is abandoned, not cancelled, as under MCPMark's agents: its client (mcp 1.12)
sends no ``notifications/cancelled``, so the server finishes the call (a PostgreSQL statement commits) while
the model reads that it timed out. A cancelled call is rolled back instead, and the end state differs."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.runner.agent.call_classes import CallClassifier
from mcpfleet.runner.agent.conversation import MCPMARK
from mcpfleet.runner.agent.loop import _call_tool_as_mcpmark
from mcpfleet.runner.agent.react import _act
from mcpfleet.runner.agent.transcript import ToolCallRecord, TurnRecord
from mcpfleet.runner.environment.mcp_client import AbandonedCalls, call_tool_abandoning, connect_stdio
from mcpfleet.runner.environment.server import ServerCommand
from mcpfleet.runner.spec.load import parse_evalrun

SLOW_SERVER = """
import anyio
from pathlib import Path
from typing import Any
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
    abandoned = AbandonedCalls()
    with open(tmp_path / "server.log", "wb") as log:
        async with connect_stdio(server(tmp_path), log) as session:
            # The control: a call cancelled at its timeout (the SDK's default) is stopped by this server.
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await session.call_tool("slow_mark", {"path": str(tmp_path / "cancelled"), "seconds": 0.6})
            started = time.perf_counter()
            with pytest.raises(TimeoutError):
                await call_tool_abandoning(
                    session, "slow_mark", {"path": str(tmp_path / "abandoned"), "seconds": 0.6}, 0.2, abandoned
                )
            assert time.perf_counter() - started < 0.5  # the model is not kept waiting past the timeout
            assert len(abandoned) == 1
            pong = await session.call_tool("ping", {})  # the session serves the next call meanwhile
            assert pong.content[0].text == "pong"  # type: ignore[union-attr]
            await asyncio.sleep(1.0)
            assert (tmp_path / "abandoned").read_text() == "done"
            assert not (tmp_path / "cancelled").exists()
            assert not abandoned
            # A call still running when the agent ends is stopped then (MCPMark stops its server), before the
            # verifier reads the end state; only that agent run's calls are, though another runs on the session.
            other = AbandonedCalls()
            with pytest.raises(TimeoutError):
                await call_tool_abandoning(
                    session, "slow_mark", {"path": str(tmp_path / "late"), "seconds": 1}, 0.1, abandoned
                )
            with pytest.raises(TimeoutError):
                await call_tool_abandoning(
                    session, "slow_mark", {"path": str(tmp_path / "other"), "seconds": 1}, 0.1, other
                )
            assert await AbandonedCalls().end() == 0 and (len(abandoned), len(other)) == (1, 1)
            assert await abandoned.end() == 1 and not abandoned and len(other) == 1
            await asyncio.sleep(1.3)
            assert not (tmp_path / "late").exists() and (tmp_path / "other").read_text() == "done"
            assert not other
            # A call still running when the session closes ends with it.
            with pytest.raises(TimeoutError):
                await call_tool_abandoning(
                    session, "slow_mark", {"path": str(tmp_path / "last"), "seconds": 30}, 0.1, abandoned
                )
    for _ in range(40):
        if not abandoned:
            break
        await asyncio.sleep(0.05)
    assert not abandoned and not (tmp_path / "last").exists()


async def test_mcpmarks_agent_and_its_react_agent_both_abandon(tmp_path: Path) -> None:
    """Both agents read the timeout text MCPMark writes, and the server's work still lands."""
    with open(tmp_path / "server.log", "wb") as log:
        async with connect_stdio(server(tmp_path), log) as session:
            listed = (await session.list_tools()).tools
            known = [t.name for t in listed]
            args = {"path": str(tmp_path / "agent"), "seconds": 0.5}
            rec = ToolCallRecord(name="slow_mark", call_id="c1", arguments=json.dumps(args))
            abandoned = AbandonedCalls()
            text = await _call_tool_as_mcpmark(
                session, set(known), "slow_mark", json.dumps(args), 0.1, MCPMARK, rec, abandoned
            )
            assert text == MCPMARK.tool_timed_out("slow_mark", 0.1) and rec.is_error
            turn = TurnRecord(index=1)
            action = {"tool": "slow_mark", "arguments": {"path": str(tmp_path / "react"), "seconds": 0.5}}
            observed = await _act(session, known, action, 0.1, turn, CallClassifier(listed), abandoned)
            assert "slow_mark" in observed and "tim" in observed.lower() and turn.tool_calls[0].is_error
            await asyncio.sleep(1.0)
            assert (tmp_path / "agent").read_text() == (tmp_path / "react").read_text() == "done"


async def test_a_trial_ends_its_own_agents_abandoned_calls_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When a trial's agent ends, the trial stops the calls that agent abandoned, before its verifier reads the
    end state, and leaves alone those of a trial still running beside it in the same process."""
    from conftest import make_tiny_pack

    from mcpfleet.runner.agent import loop as agents
    from mcpfleet.runner.plan import expand as plan
    from mcpfleet.runner.results import store
    from mcpfleet.runner.trial import engine as trial

    pack = make_tiny_pack(tmp_path / "pack")
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {"models": [{"name": "m", "model": "scripted/oracle"}], "tasks": {"path": str(pack)}},
    }
    [one] = plan.plan(parse_evalrun(doc), pack)
    calls: list[asyncio.Future[Any]] = []  # each agent's abandoned call, in the order the agents started
    both = asyncio.Event()
    other_when_first_ended: list[bool] = []

    async def agent(session: Any, task: Any, target: Any, *, abandoned: AbandonedCalls, **_: Any) -> agents.AgentRun:
        call = asyncio.ensure_future(asyncio.Event().wait())  # a call the server never answers
        abandoned.add(call)
        calls.append(call)
        if len(calls) == 2:
            both.set()
            async with asyncio.timeout(20):  # the first trial's agent has ended: its call must be stopped
                while not calls[0].done():
                    await asyncio.sleep(0.02)
            other_when_first_ended.append(call.done())
        else:
            await both.wait()
        return agents.AgentRun(messages=[{"role": "assistant", "content": "done"}])

    monkeypatch.setattr(agents, "run_llm_agent", agent)
    context = trial.TrialContext(scripted_base_url="http://127.0.0.1:9/v1")
    await asyncio.gather(
        trial.run_trial(one, store.LocalStore(tmp_path / "a"), context),
        trial.run_trial(one, store.LocalStore(tmp_path / "b"), context),
    )
    assert other_when_first_ended == [False]
    assert len(calls) == 2 and all(c.cancelled() for c in calls)
