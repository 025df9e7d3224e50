"""Warm workers' start-up work: spare MCP servers boot through a gate, the last trials start no spare,
and the forkserver pre-imports what LiteLLM would import lazily in every worker."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from conftest import make_tiny_pack
from proctree import processes_naming

from mcpfleet.runner.environment import mcp_client
from mcpfleet.runner.environment.mcp_client import connect_stdio
from mcpfleet.runner.environment.server import ServerCommand
from mcpfleet.runner.launch import warmup
from mcpfleet.runner.launch.launcher import RunState, Scheduler
from mcpfleet.runner.launch.workerpool import WorkerSlots
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.results.store import store_config
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.trial import warm
from mcpfleet.runner.trial.engine import AfterFirstCall
from mcpfleet.runner.trial.warm import WarmServer


async def test_a_spare_boots_only_through_the_gate_and_gives_it_back() -> None:
    gate = threading.Semaphore(1)
    assert gate.acquire(False)  # another worker's spare is booting
    server = WarmServer("filesystem", gate)
    try:
        await asyncio.sleep(0.5)
        assert not server._ready.done()  # noqa: SLF001 - still waiting at the gate, no Node process yet
        assert not list(server.state_dir.iterdir())
        gate.release()
        session = await asyncio.wait_for(server.session(), 30)
        assert (await session.list_tools()).tools
        # Released once booted, exactly once: one acquire succeeds, a second does not.
        assert gate.acquire(False)
        assert not gate.acquire(False)
        gate.release()
    finally:
        await server.close()


async def test_a_leaked_gate_delays_a_spare_but_never_blocks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warm, "GATE_WAIT_S", 0.3)
    gate = threading.Semaphore(0)  # a worker killed mid-boot never gave its permit back
    server = WarmServer("filesystem", gate)
    try:
        session = await asyncio.wait_for(server.session(), 30)
        assert (await session.list_tools()).tools
        assert not gate.acquire(False)  # booting without a permit must not hand out one
    finally:
        await server.close()


class _InstantPool:
    """Runs nothing: records each WorkItem and answers at once, as a worker reporting a pass would."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def submit(self, fn: Any, item: Any) -> Future[dict[str, Any]]:
        self.items.append(item)
        fut: Future[dict[str, Any]] = Future()
        fut.set_result(
            {"trial_id": f"t{len(self.items)}", "model": "oracle", "passed": True, "failure": None, "error": None}
        )
        return fut

    def shutdown(self, **kw: Any) -> None:
        pass


def test_only_trials_dispatched_with_nothing_left_queued_skip_the_spare(tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "pack", tasks=5)
    run = parse_evalrun(
        {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "s"},
            "spec": {
                "models": [{"name": "oracle", "model": "scripted/oracle"}],
                "tasks": {"path": str(pack)},
                "concurrency": {"total": 2},
                "output": {"uri": str(tmp_path / "out")},
            },
        }
    )
    trials = plan(run, tmp_path)
    assert len(trials) == 5
    pool = _InstantPool()
    done: list[dict[str, Any]] = []
    scheduler = Scheduler(
        run,
        RunState(todo=trials, skipped=0),
        cast(WorkerSlots, pool),  # a stand-in: run_all() only calls submit()
        store_config(run.spec.output, run.name, tmp_path),
        None,
        done.append,
    )
    asyncio.run(scheduler.run_all())
    assert len(done) == 5
    # Two in flight: the first four leave work behind them (a spare will be claimed), the fifth does not.
    assert [item.more_queued for item in pool.items] == [True, True, True, True, False]


def test_the_forkserver_warm_up_list_matches_this_litellm() -> None:
    # A LiteLLM upgrade that moves one of these modules loses the warm-up silently; this says so.
    assert warmup.MISSING == []
    assert warmup.preload(("no.such.module",)) == ["no.such.module"]


SLOW_EXIT_SERVER = """
import time
from mcp.server.mcpserver import MCPServer

app = MCPServer("slow-exit")


@app.tool()
def ping() -> str:
    return "pong"


app.run()
time.sleep(30)  # stdin closed, and the server keeps going (as postgres-mcp does while it closes its pool)
"""


async def test_a_server_that_lingers_after_its_stdin_closes_is_stopped_within_the_grace(tmp_path: Path) -> None:
    """The SDK would wait 2 s before SIGTERM; a trial's server is disposable, so its teardown must not."""
    script = tmp_path / "slow_exit.py"
    script.write_text(SLOW_EXIT_SERVER)
    cmd = ServerCommand(sys.executable, [str(script)], {"MARK": str(tmp_path)})
    with open(tmp_path / "server.log", "wb") as log:
        async with connect_stdio(cmd, log) as session:
            assert (await session.call_tool("ping", {})).content[0].text == "pong"  # type: ignore[union-attr]
            closing = time.perf_counter()
    took = time.perf_counter() - closing
    assert took < mcp_client.STOP_GRACE_S + 0.8, f"stopping the server took {took:.2f} s"
    assert not processes_naming(str(tmp_path))


async def test_the_spare_hook_fires_once_when_the_first_tool_call_has_returned() -> None:
    """Workers start their spare then, not while the trial's own server warms up on its first call."""
    events: list[str] = []

    class Session:
        async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
            events.append(f"call {name}")
            await asyncio.sleep(0)
            events.append(f"return {name}")
            return "ok"

        async def list_tools(self) -> list[str]:
            events.append("list")
            return []

    hooked = AfterFirstCall(Session(), lambda: events.append("spare"))
    await hooked.list_tools()
    assert events == ["list"]
    assert await hooked.call_tool("a", {}) == "ok"
    await hooked.call_tool("b", {})
    hooked.fire()  # the agent's end: already fired
    assert events == ["list", "call a", "return a", "spare", "call b", "return b"]

    late: list[str] = []
    silent = AfterFirstCall(Session(), lambda: late.append("spare"))
    silent.fire()  # an agent that called no tool: the trial's end starts it
    silent.fire()
    assert late == ["spare"]


class _FakeSpare:
    made: list[float] = []

    def __init__(self, service: str, gate: Any = None, resource: Any = None, pack: Any = None, variant: Any = None):
        _FakeSpare.made.append(time.perf_counter())

    @classmethod
    def supports(cls, service: str, pack: str | None = None, variant: object = None) -> bool:
        return True


async def test_a_worker_starts_its_spare_once_the_next_model_request_is_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not on the first tool call's return, where its spawn and handshake landed on the agent's next request."""
    from mcpfleet.runner.launch import worker
    from mcpfleet.runner.spec.evalrun import AgentKind
    from mcpfleet.runner.trial import engine as trial_mod

    monkeypatch.setattr(warm, "WarmServer", _FakeSpare)
    monkeypatch.setattr(worker, "_spare", None)
    _FakeSpare.made = []
    marks: dict[str, float] = {}

    async def agent_with_a_model_wait(spec: Any, store: Any, ctx: Any, attempt: int) -> str:
        ctx.on_first_call()  # the first tool call returned
        marks["returned"] = time.perf_counter()
        assert _FakeSpare.made == [], "started on the tool call's return, in the agent's way"
        await asyncio.sleep(worker.SPARE_DELAY_S * 4)  # the next model request, in flight
        return "done"

    spec = SimpleNamespace(service="filesystem", agent=AgentKind.mcpmark, tasks_root=None, server=None)
    item = worker.WorkItem(spec_json="", store=cast(Any, None), scripted_base_url=None, infra_attempt=0)
    monkeypatch.setattr(trial_mod, "run_trial", agent_with_a_model_wait)
    assert await worker._run(spec, None, item) == "done"
    assert len(_FakeSpare.made) == 1
    assert _FakeSpare.made[0] - marks["returned"] >= worker.SPARE_DELAY_S * 0.9

    # A trial that ends within the delay starts its spare as it ends, never in the middle of the next trial.
    monkeypatch.setattr(worker, "_spare", None)
    _FakeSpare.made = []

    async def quick(spec: Any, store: Any, ctx: Any, attempt: int) -> str:
        ctx.on_first_call()
        return "quick"

    monkeypatch.setattr(trial_mod, "run_trial", quick)
    assert await worker._run(spec, None, item) == "quick"
    assert len(_FakeSpare.made) == 1
    await asyncio.sleep(worker.SPARE_DELAY_S * 3)
    assert len(_FakeSpare.made) == 1


FIRST_CALL = """
import asyncio, sys
from pathlib import Path
import mcpfleet.runner.launch.warmup  # what the forkserver preloads
import pydantic
from mcpfleet.runner.llm import client as llm
from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess

def deferred():
    seen, todo, out = set(), list(pydantic.BaseModel.__subclasses__()), set()
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            todo.extend(cls.__subclasses__())
            if not cls.__dict__.get("__pydantic_complete__", True):
                out.add(f"{cls.__module__}:{cls.__qualname__}")
    return out

TOOL = {"type": "function", "function": {"name": "list_allowed_directories", "parameters": {"type": "object"}}}

async def first_call(url, model, tools):
    target = llm.LLMTarget(model=model, api_base=url, api_key="scripted", params={}, timeout=60)
    response, _, _ = await llm.complete(target, [{"role": "user", "content": "hi"}], tools)
    llm.usage_of(response, target)
    llm.reply_of(response, [])
    await llm.close(target)

with ScriptedServerProcess([Path(sys.argv[1])]) as url:
    modules, models = set(sys.modules), deferred()
    asyncio.run(first_call(url, "hosted_vllm/noop", []))
    asyncio.run(first_call(url, "hosted_vllm/loop", [TOOL]))  # a reply with a tool call
    print(" ".join(sorted(set(sys.modules) - modules)))
    print(" ".join(sorted(models - deferred())))
"""


def test_a_warm_workers_first_llm_call_imports_and_builds_nothing_more(tmp_path: Path) -> None:
    """Every worker paid these imports (~30 modules, tens of ms of CPU) and schema builds on its first call, all
    at once when a run starts; a LiteLLM upgrade that adds lazy work to the call path shows here."""
    script = tmp_path / "first_call.py"
    script.write_text(FIRST_CALL)
    pack = make_tiny_pack(tmp_path / "pack")
    out = subprocess.run([sys.executable, str(script), str(pack)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    modules, models = (out.stdout.split("\n") + ["", ""])[:2]
    imported = [m for m in modules.split() if m.startswith("litellm")]
    assert imported == [], f"add to warmup.LAZY_MODULES: {imported}"
    # LiteLLM's deferred pydantic models, completed on first use, made a worker's first round trip ~70 ms, not ~11.
    assert models.split() == [], f"add to warmup.REBUILT_MODELS: {models}"


WARMED_FIRST_CALL = """
import asyncio, os, resource, sys
from pathlib import Path
import mcpfleet.runner.launch.warmup  # what the forkserver preloads
from mcpfleet.runner.launch import worker
from mcpfleet.runner.llm import client as llm
from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess

TOOL = {"type": "function", "function": {"name": "list_allowed_directories", "parameters": {"type": "object"}}}

async def first_call(url):
    target = llm.LLMTarget(model="hosted_vllm/loop", api_base=url, api_key="scripted", params={}, timeout=60)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    response, _, _ = await llm.complete(target, [{"role": "user", "content": "hi"}], [TOOL])
    llm.usage_of(response, target)
    llm.reply_of(response, [])
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    await llm.close(target)
    return faults

with ScriptedServerProcess([Path(sys.argv[1])]) as url:
    for models in ((), ("hosted_vllm/warmup", "anthropic/claude-sonnet-4-20250514")):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # a pool worker, forked from the preloaded process as the forkserver forks them
            worker.init_worker(None, models)
            os.write(write, str(worker._loop.run_until_complete(first_call(url))).encode())
            os._exit(0)
        os.close(write)
        print(os.read(read, 100).decode())
        os.waitpid(pid, 0)
"""


def test_a_worker_makes_its_first_llm_round_trip_before_its_first_trial(tmp_path: Path) -> None:
    """A forked worker's first completion wrote to ~4,300 of the forkserver's pages (each copied on write) and
    took ~45 ms against ~12; warmed at its start, its first trial's first call copies a few dozen."""
    script = tmp_path / "warmed_first_call.py"
    script.write_text(WARMED_FIRST_CALL)
    pack = make_tiny_pack(tmp_path / "pack")
    out = subprocess.run([sys.executable, str(script), str(pack)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    cold, warmed = (int(n) for n in out.stdout.split())
    assert cold > 1000, f"the cold first call copied only {cold} pages: is the warm-up still needed?"
    assert warmed < cold / 5, f"a warmed worker's first call copied {warmed} pages against {cold} cold"


def test_the_warm_up_covers_the_providers_the_trials_own_client_covers() -> None:
    from mcpfleet.runner.llm.warmup import providers, warm_models

    models = [
        SimpleNamespace(is_scripted=True, model="scripted/oracle"),
        SimpleNamespace(is_scripted=False, model="gpt-4o"),
    ]
    assert warm_models(models) == ["hosted_vllm/warmup", "gpt-4o"]
    assert providers(["hosted_vllm/a", "gpt-4o", "openai/b", "anthropic/claude-sonnet-4-20250514", "nope/x"]) == [
        "hosted_vllm",
        "openai",
    ]


class CountingEndpoint:
    """The warm-up's stand-in completion endpoint, counting the connections made to it and still open."""

    server: Any
    listener: asyncio.Server
    made = 0

    def _connection(self) -> Any:
        self.made += 1
        return self.server()

    async def start(self) -> str:
        from aiohttp import web

        from mcpfleet.runner.llm import warmup as llm_warmup

        self.server = web.Server(llm_warmup._answer, access_log=None)  # (it needs the running loop)
        self.listener = await asyncio.get_running_loop().create_server(self._connection, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.listener.sockets[0].getsockname()[1]}/v1"

    async def open_after(self, seconds: float = 2.0) -> int:
        """Connections still open once the clients had ``seconds`` to close theirs."""
        deadline = time.monotonic() + seconds
        while self.server.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return len(self.server.connections)

    async def stop(self) -> None:
        self.listener.close()
        await self.server.shutdown(0)
        await self.listener.wait_closed()


async def _trials(base: str, n: int, key: str = "k") -> None:
    from mcpfleet.runner.llm import client as llm

    for _ in range(n):
        target = llm.LLMTarget(model="hosted_vllm/m", api_base=base, api_key=key, timeout=10, retries=0)
        response, _, _ = await llm.complete(target, [{"role": "user", "content": "hi"}], [])
        assert llm.reply_of(response, []).tool_calls[0].name == "warm"
        await llm.close(target)


async def test_a_warm_workers_trials_share_one_connection_to_their_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each trial's client opened its own connection (a TLS handshake to a real provider on its first call);
    a worker's trials now reuse one, while a lone trial (a pod, the serial loop) still closes its own."""
    from mcpfleet.runner.llm import client as llm

    endpoint = CountingEndpoint()
    base = await endpoint.start()
    try:
        monkeypatch.setattr(llm, "_shared", None)
        await _trials(base, 3)
        assert endpoint.made == 3
        assert await endpoint.open_after() == 0  # each lone trial closed its own
        llm.share_clients()
        await _trials(base, 3)
        assert endpoint.made == 4
        await _trials(base, 2, key="another")  # another key, another client: never one made with someone else's key
        assert endpoint.made == 5
        assert await endpoint.open_after(0.2) == 2  # kept for the worker's next trials
        await llm.close_shared()
        assert await endpoint.open_after() == 0
        await _trials(base, 1)  # sharing goes on after a close, with a new client
        assert endpoint.made == 6
    finally:
        await llm.close_shared()
        await endpoint.stop()


async def test_a_lone_trial_closes_the_client_its_agent_opened_through_a_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MCPMark's agents call through a copy of the trial's target (MCPMark's params, its retries); the trial
    closes the target it made. Each copy held its own client, so the one that made the calls was never closed:
    an aiohttp session and its connection left to the garbage collector, per trial of a pod or the serial loop."""
    from mcpfleet.runner.agent.conversation import MCPMARK
    from mcpfleet.runner.llm import client as llm

    monkeypatch.setattr(llm, "_shared", None)
    endpoint = CountingEndpoint()
    base = await endpoint.start()
    try:
        target = llm.LLMTarget(model="hosted_vllm/m", api_base=base, api_key="k", timeout=10, retries=0)
        copy = MCPMARK.llm_target(target, [])
        assert copy is not target and copy.model_fault_retries > 0
        for _ in range(2):
            response, _, _ = await llm.complete(copy, [{"role": "user", "content": "hi"}], [])
            assert llm.reply_of(response, []).tool_calls[0].name == "warm"
        assert endpoint.made == 1 and await endpoint.open_after(0.2) == 1
        await llm.close(target)
        assert await endpoint.open_after() == 0
    finally:
        await endpoint.stop()


def test_a_worker_closes_the_clients_its_trials_shared_when_it_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool workers leave through os._exit; their exit finalizer ends the kept connections (a FIN the provider
    sees), as it stops the spare MCP server."""
    from mcpfleet.runner.launch import worker
    from mcpfleet.runner.llm import client as llm

    loop = asyncio.new_event_loop()
    monkeypatch.setattr(worker, "_loop", loop)
    monkeypatch.setattr(worker, "_spare", None)
    monkeypatch.setattr(llm, "_shared", None)
    endpoint = CountingEndpoint()
    try:
        base = loop.run_until_complete(endpoint.start())
        llm.share_clients()
        loop.run_until_complete(_trials(base, 2))
        assert loop.run_until_complete(endpoint.open_after(0.2)) == 1
        worker._close_held()
        assert loop.run_until_complete(endpoint.open_after()) == 0
        assert llm._shared == {}
    finally:
        loop.run_until_complete(llm.close_shared())
        loop.run_until_complete(endpoint.stop())
        left = asyncio.all_tasks(loop)  # LiteLLM's logging worker, as asyncio.run would end it
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.close()
