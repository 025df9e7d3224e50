"""``mcpfleet servers inspect``: start each declared server once, the way a trial would, and say what it offers.

A server's tools are what a model reads before its first turn: their names, descriptions and input schemas, and
what the list costs in tokens (LiteLLM's counter for the model named). A server that does not start, or lists
no tools, is reported as a failure, before any sweep pays for trials of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet.runner.environment.mcp_client import (
    connect_http,
    connect_stdio,
    server_info,
    tool_to_openai,
    tools_digest,
)
from mcpfleet.runner.llm.faults import one_line
from mcpfleet.runner.services import Service
from mcpfleet.runner.spec.task import Task

START_TIMEOUT_S = 120.0


@dataclass
class ServerReport:
    label: str  # service, or service@variant
    ok: bool = False
    error: str | None = None
    name: str | None = None
    version: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI function tools, as a model gets them
    digest: str | None = None
    tokens: int | None = None
    refused: list[str] = field(default_factory=list)


def tool_tokens(tools: list[dict[str, Any]], model: str) -> int:
    """Tokens the tool list adds to a request (LiteLLM's counter), over a one-word message."""
    import litellm

    message = [{"role": "user", "content": "x"}]
    return int(litellm.token_counter(model=model, messages=message, tools=tools)) - int(  # type: ignore[arg-type]
        litellm.token_counter(model=model, messages=message)
    )


async def inspect_one(service: Service, task: Task, label: str, model: str) -> ServerReport:
    report = ServerReport(label)
    with tempfile.TemporaryDirectory(prefix="mcpfleet-inspect-") as work:
        state = Path(work) / "state"
        log_path = Path(work) / "server.log"
        try:
            with open(log_path, "w+b") as log:
                async with asyncio.timeout(START_TIMEOUT_S), contextlib.AsyncExitStack() as stack:
                    env = await stack.enter_async_context(service.environment(task, state, None))
                    connect = connect_http(env.url) if env.url else connect_stdio(env.server, log, cwd=state)
                    session = await stack.enter_async_context(connect)
                    listed = list((await session.list_tools()).tools)
                    report.name, report.version = server_info(session)
        except Exception as exc:  # noqa: BLE001 - the server's failure is the report, with its log's end
            tail = log_path.read_bytes()[-600:].decode(errors="replace").strip() if log_path.exists() else ""
            report.error = one_line(exc, []) + (f" (server log: {tail.splitlines()[-1]})" if tail else "")
            return report
    report.digest = tools_digest(listed)
    report.refused = sorted(t.name for t in listed if t.name in service.refused_tools)
    report.tools = [tool_to_openai(t) for t in listed if t.name not in service.refused_tools]
    if not report.tools:
        report.error = "the server lists no tools" + (" an agent may call" if listed else "")
        return report
    try:
        report.tokens = tool_tokens(report.tools, model)
    except Exception:  # noqa: BLE001 - a model LiteLLM cannot count for: the list is still shown
        report.tokens = None
    report.ok = True
    return report


async def inspect_all(targets: list[tuple[Service, Task, str]], model: str) -> list[ServerReport]:
    return [await inspect_one(service, task, label, model) for service, task, label in targets]
