"""The MCP services mcpfleet evaluates: one module per service, a registry here.

Each service says how its run-scoped resource starts (a PostgreSQL cluster; nothing for the filesystem), how
one trial's environment is prepared and removed, which MCP server serves it and what its verifier is told.
The trial engine, launcher, worker and task checker only call these; adding a service (Playwright) means a
module and a line in ``SERVICES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from mcpfleet.runner.services.base import Service, Spare, TrialEnv
from mcpfleet.runner.services.filesystem import FilesystemService
from mcpfleet.runner.services.playwright import PlaywrightService
from mcpfleet.runner.services.postgres import PostgresService
from mcpfleet.runner.services.toolcall import ToolCallService

SERVICES: dict[str, Service] = {
    s.name: s for s in (FilesystemService(), PostgresService(), PlaywrightService(), ToolCallService())
}

__all__ = [
    "SERVICES",
    "Service",
    "Spare",
    "TrialEnv",
    "get_service",
    "run_resources",
    "sweep_leftovers",
]


def get_service(name: str) -> Service:
    try:
        return SERVICES[name]
    except KeyError:
        raise ValueError(f"service '{name}' is not supported yet; known: {', '.join(sorted(SERVICES))}") from None


def sweep_leftovers() -> None:
    """Every service's leftovers of killed runs (e.g. a SIGKILLed PostgreSQL run's RAM-backed cluster folder)."""
    for service in SERVICES.values():
        service.sweep_leftovers()


@contextmanager
def run_resources(
    services: Iterable[str], prefork: bool = False, on_lost: Callable[[str], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Start the run-scoped resources of these services once (in the calling thread: the main thread, whose
    life bounds theirs) and stop them when the block ends, however it ends. Yields {service: handle}.
    ``prefork``: with zygotes for Python servers (``mcpfleet run``, see prefork.py). ``on_lost``: told why (from
    any thread) when a resource is gone for good and the run cannot go on; by default the run is interrupted."""
    with ExitStack() as stack:
        handles: dict[str, Any] = {}
        for name in sorted(set(services)):
            handle = stack.enter_context(get_service(name).run_resource(prefork, on_lost))
            if handle is not None:
                handles[name] = handle
        yield handles
