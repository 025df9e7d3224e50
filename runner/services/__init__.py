"""The MCP services mcpfleet evaluates: one module per service, a registry here.

Each service says how its run-scoped resource starts (a PostgreSQL cluster; nothing for the filesystem), how
one trial's environment is prepared and removed, which MCP server serves it and what its verifier is told.
The trial engine, launcher, worker and task checker only call these; adding a bundled service (Playwright) means
a module and a line in ``SERVICES``; a pack's own service is a declaration (``<pack>/<service>/service.yaml``,
declared.py), registered here when the pack's tasks are found (``register_pack``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from mcpfleet.runner.services.base import Service, Spare, TrialEnv
from mcpfleet.runner.services.filesystem import FilesystemService
from mcpfleet.runner.services.playwright import PlaywrightService
from mcpfleet.runner.services.postgres import PostgresService
from mcpfleet.runner.services.toolcall import ToolCallService

SERVICES: dict[str, Service] = {
    s.name: s for s in (FilesystemService(), PostgresService(), PlaywrightService(), ToolCallService())
}

BUNDLED: dict[str, Service] = dict(SERVICES)
# Each pack's declared services, by the pack's resolved root: what a trial of that pack runs (``service_of``).
# SERVICES holds the latest pack's too, for the callers that name a service alone (one pack per run).
_PACKS: dict[Path, dict[str, Service]] = {}
_SIGNATURES: dict[Path, tuple[tuple[tuple[str, int, int], ...], tuple[str, ...]]] = {}


def _signature(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    """What identifies a pack's declaration files as read: each one's path, size and modification time."""
    out = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


__all__ = [
    "SERVICES",
    "Service",
    "Spare",
    "TrialEnv",
    "get_service",
    "register_pack",
    "service_of",
    "run_resources",
    "sweep_leftovers",
]


def get_service(name: str) -> Service:
    try:
        return SERVICES[name]
    except KeyError:
        raise ValueError(f"service '{name}' is not supported yet; known: {', '.join(sorted(SERVICES))}") from None


def register_pack(root: Path, overrides: Iterable[str] = (), *, trusted: bool = False) -> dict[str, Service]:
    """Load and register the services ``root`` declares (``<root>/<service>/service.yaml``); returns them by name.
    A name of a bundled service is refused unless ``overrides`` names it (``spec.tasks.overrideServices``) or
    ``trusted`` (a planned trial's pack, whose EvalRun passed that check). DeclarationError (a ValueError) names
    the file, the key and the fix."""
    from mcpfleet.runner.services.declared import DeclaredService
    from mcpfleet.runner.spec.service_decl import DECLARATION_FILE, DeclarationError, parse_declaration
    from mcpfleet.runner.spec.yamlload import load_file

    key = Path(root).resolve()
    found: dict[str, Service] = {}
    try:
        paths = sorted(key.glob(f"*/{DECLARATION_FILE}"))
    except OSError:
        paths = []
    allowed = set(overrides)
    seen = _signature(paths)
    cached = _SIGNATURES.get(key)
    if cached is not None and cached[0] == seen and (trusted or not (set(cached[1]) & set(BUNDLED)) - allowed):
        return _PACKS[key]  # the same files as last read (every trial's look-up of its task asks again)
    for path in paths:
        name = path.parent.name
        if name in BUNDLED and name not in allowed and not trusted:
            raise DeclarationError(
                f"{path}: declares '{name}', which is a bundled service; rename the folder, or let the EvalRun "
                f"override the bundled one (spec.tasks.overrideServices: [{name}])"
            )
        try:
            docs = load_file(path)
        except Exception as exc:  # noqa: BLE001 - OSError, a YAML error, a limit: the file's problem, named
            raise DeclarationError(f"{path}: cannot be read as YAML: {str(exc).strip()}") from None
        if len(docs) != 1:
            raise DeclarationError(f"{path}: expected one YAML document, found {len(docs)}")
        found[name] = DeclaredService(name, parse_declaration(path, docs[0]), path.parent)
    previous = _PACKS.get(key, {})
    for name in previous:
        if name not in found and name not in BUNDLED and SERVICES.get(name) is previous[name]:
            del SERVICES[name]  # a declaration removed since
    _PACKS[key] = found
    _SIGNATURES[key] = (seen, tuple(found))
    # A declaration that overrides a bundled service is its pack's alone (service_of): the process may run
    # other packs (the operator), whose trials of that name are the bundled service's.
    SERVICES.update({name: service for name, service in found.items() if name not in BUNDLED})
    return found


def service_of(name: str, pack: Path | str | None = None, variant: Any = None) -> Service:
    """The service a trial of ``pack`` named ``name`` runs (its pack's declaration before any other), with the
    server of ``variant`` (spec.servers) if given."""
    service: Service | None = None
    if pack is not None:
        key = Path(pack).resolve()
        if key not in _PACKS:
            register_pack(key, trusted=True)
        service = _PACKS[key].get(name)
    return (service or BUNDLED.get(name) or get_service(name)).with_variant(variant)


def sweep_leftovers() -> None:
    """Every service's leftovers of killed runs (e.g. a SIGKILLed PostgreSQL run's RAM-backed cluster folder)."""
    for service in BUNDLED.values():
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
