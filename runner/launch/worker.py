"""Warm worker processes for the local launcher.

Workers fork from a forkserver that has already imported LiteLLM and the MCP SDK, so the seconds of
imports are paid once per ``mcpfleet run``, not per worker or per trial. Each worker keeps one event
loop for its life (LiteLLM's HTTP clients are cached per loop) and runs one trial at a time. A
terminal Ctrl-C is handled by the parent, which sends SIGTERM: the running trial is cancelled and,
being cancelled, writes no record.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import multiprocessing.util
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet.runner._util import tmpdirs
from mcpfleet.runner.results.store import StoreConfig

# The forkserver's parent-death signal first, then the engine and LiteLLM's lazy imports (see warmup).
PRELOAD = ["mcpfleet.runner.launch.forkserver_guard", "mcpfleet.runner.launch.warmup"]

_loop: asyncio.AbstractEventLoop | None = None
_current: asyncio.Task[Any] | None = None
_spare: Any = None  # WarmServer for the next trial, started while the current one runs
_store: tuple[StoreConfig, Any] | None = None  # the last store opened (an S3 client is worth reusing)
_gate: Any = None  # the pool's BootGate: how many spare servers may boot at once
_stopping = False

# How long after the trial's first tool call its worker starts the next trial's spare server. The spare's
# process spawn and MCP handshake run on this event loop and its boot takes a core: started the instant the
# tool call returned, they landed on the agent's very next model request (bench_local: that round trip took
# 10-16 ms of harness time instead of 6-7). A moment later the request is on the wire and the model is
# thinking (seconds for a real one, 0.5 s for the bench's scripted one), which is time the trial does not use.
SPARE_DELAY_S = 0.05


class TrialCancelled(Exception):
    """The trial was stopped from outside (Ctrl-C); nothing was recorded."""


@dataclass(frozen=True)
class WorkItem:
    spec_json: str
    store: StoreConfig
    scripted_base_url: str | None
    infra_attempt: int
    # The models' API keys, passed explicitly: workers fork from a long-lived forkserver whose environment
    # is from when it started, and a trial must never depend on process-global state anyway.
    env: dict[str, str] = field(default_factory=dict, repr=False)
    # Whether more trials are queued, so a spare server for this worker's next trial is worth starting.
    more_queued: bool = True
    # Run-scoped resources by service (the run's PostgreSQL cluster: port, folder, credentials), by value.
    resources: dict[str, Any] = field(default_factory=dict, repr=False)


def _on_sigterm(signum: int, frame: Any) -> None:
    global _stopping
    _stopping = True
    if _loop is not None and _current is not None and not _current.done():
        _loop.call_soon_threadsafe(_current.cancel)


def init_worker(gate: Any = None, models: tuple[str, ...] = ()) -> None:
    """Set up a pool worker; ``models`` (LiteLLM model strings) get their first round trip here (llm_warmup)."""
    global _loop, _gate
    _gate = gate
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C
    # Ignored, and no longer blocked (the forkserver was started with it blocked): what a trial starts inherits
    # "ignored", which a server that installs its own handler overrides, rather than a mask it may never clear.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGTERM, _on_sigterm)
    # The forkserver (our parent) dies with the run, even a SIGKILLed one; we then stop too (see _watch_parent).
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="watch-parent", daemon=True).start()
    _loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_loop)
    # Pool workers leave through os._exit, so atexit never runs; multiprocessing's own exit finalizers do.
    multiprocessing.util.Finalize(None, _close_held, exitpriority=10)
    import mcpfleet.runner.llm.client  # already imported in the forkserver

    if models:
        from mcpfleet.runner.llm.warmup import warm

        try:
            _loop.run_until_complete(warm(list(models)))
        except Exception:  # noqa: BLE001 - best effort: the first trial pays the first call instead
            pass
    # After the warm-up (its stand-in endpoint is gone): from here the trials share their clients (llm._shared).
    mcpfleet.runner.llm.client.share_clients()


def _watch_parent(parent: int, poll_s: float = 0.5, grace_s: float = 10.0) -> None:
    """Once re-parented (the run is gone), cancel the running trial as a SIGTERM does, give it ``grace_s`` to
    tear its environment down, then exit: the pool's queue never reports EOF to a worker (every worker holds
    its write end), so an idle worker would otherwise wait for the next trial forever."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _current is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    os._exit(1)


def _close_held() -> None:
    """At the worker's exit: its spare MCP server and the LLM clients its trials shared."""
    global _spare
    spare, _spare = _spare, None
    if _loop is None or _loop.is_closed():
        return
    if spare is not None:
        _loop.run_until_complete(spare.close())
    from mcpfleet.runner.llm import client as llm

    _loop.run_until_complete(llm.close_shared())


async def _run(spec: Any, store: Any, item: WorkItem) -> Any:
    """Claim the spare server if it fits, start the next spare, run the trial."""
    global _spare
    from mcpfleet.runner.spec.evalrun import AgentKind
    from mcpfleet.runner.spec.trial import TrialContext
    from mcpfleet.runner.trial.engine import run_trial
    from mcpfleet.runner.trial.warm import WarmServer

    warm, _spare = _spare, None
    if warm is not None and not _fits(warm, spec):
        await warm.close()
        warm = None

    def start_spare() -> None:
        global _spare
        if _spare is None and not _stopping:
            _spare = WarmServer(spec.service, _gate, item.resources.get(spec.service), spec.tasks_root, spec.server)

    pending: list[asyncio.TimerHandle] = []

    def start_spare_soon() -> None:
        # Only once this trial's first tool call has returned: its own server is up and warm by then (booting
        # both at once doubled the CPU burst of a run's first wave, when every worker starts cold together).
        pending.append(asyncio.get_running_loop().call_later(SPARE_DELAY_S, start_spare))

    wants_spare = (
        item.more_queued
        and spec.agent != AgentKind.noop
        and WarmServer.supports(spec.service, spec.tasks_root, spec.server)
    )
    ctx = TrialContext(
        scripted_base_url=item.scripted_base_url,
        warm=warm,
        env=item.env,
        on_first_call=start_spare_soon if wants_spare else None,
        resources=item.resources,
    )
    try:
        return await run_trial(spec, store, ctx, item.infra_attempt)
    finally:
        for handle in pending:  # a trial that ended within the delay: its spare starts now, not mid-next-trial
            handle.cancel()  # (a no-op for one that ran)
        if pending:
            start_spare()  # (a no-op if it ran)


def _fits(warm: Any, spec: Any) -> bool:
    """Whether the spare can serve this trial (a missing task is the trial's to report, not the spare's)."""
    from mcpfleet.runner.tasks.discovery import find_task

    try:
        return bool(warm.fits(find_task(Path(spec.tasks_root), spec.task_id, _states(spec)), spec.server))
    except Exception:  # noqa: BLE001
        return False


def _states(spec: Any) -> Path | None:
    return Path(spec.states_path) if spec.states_path else None


_hidden: set[str] = set()


def _hide_from_servers(*folders: str | Path | None) -> None:
    """The run's output and its task packs, hidden from every sandboxed server this worker starts (sandbox.py): a
    trial's agent must not read other trials' transcripts, verifiers or oracle solutions through its server. The
    first folder is the run's own; the other runs of its output folder are hidden with it."""
    from mcpfleet.runner.environment import sandbox

    for i, folder in enumerate(folders):
        if folder is None or str(folder) in _hidden:
            continue
        _hidden.add(str(folder))
        sandbox.register_root(functools.partial(Path, folder))
        if i == 0:
            sandbox.register_root(functools.partial(beside_runs, Path(folder)))


def beside_runs(run_root: Path) -> list[Path]:
    """What a sandboxed server must not see of the output folder that holds ``run_root``: other runs' records are
    world-readable once they end (a superuser trial's shell read a finished run's transcripts: tests/attacks). The
    whole folder, unless it also holds what servers run from (the interpreter, mcpfleet's own checkout, the home
    folder: a run written to '.' or '~'); then each run folder in it (a folder with run.json, summary.json or
    trials/), listed anew for each server, so a run begun since is hidden too."""
    import sys

    output = run_root.resolve().parent
    needed = [Path(sys.prefix), Path(__file__).resolve().parents[2], Path.home(), Path.cwd()]
    if not any(n.resolve().is_relative_to(output) for n in needed):
        return [output]
    try:
        entries = list(output.iterdir())
    except OSError:
        return []
    marks = ("run.json", "summary.json", "trials")
    return [p for p in entries if p.is_dir() and not p.is_symlink() and any((p / m).exists() for m in marks)]


def run_item(item: WorkItem) -> dict[str, Any]:
    """Run one trial in this worker; returns the small part of the result the parent needs."""
    global _current, _store
    from mcpfleet.runner.spec.trial import TrialSpec

    if _stopping:
        raise TrialCancelled(item.spec_json[:80])
    assert _loop is not None, "init_worker was not run"
    spec = TrialSpec.model_validate_json(item.spec_json)
    if _store is None or _store[0] != item.store:
        _store = (item.store, item.store.open())
    _hide_from_servers(getattr(_store[1], "root", None), spec.tasks_root, spec.states_path)
    _current = _loop.create_task(_run(spec, _store[1], item))
    try:
        result = _loop.run_until_complete(_current)
    except asyncio.CancelledError:
        raise TrialCancelled(spec.trial_id) from None
    finally:
        _current = None
    return {
        "trial_id": result.trial_id,
        "model": result.model,
        "passed": result.passed,
        "failure": result.failure,
        "error": result.error,  # redacted, one line
        "llm_retries": result.totals.llm_retries,  # for the model's retry budget
        "cost_usd": result.totals.cost_usd,  # the progress line's spend (None: not priced)
    }


def make_context() -> multiprocessing.context.BaseContext:
    tmpdirs.own_multiprocessing_names()  # what a group SIGKILL leaves is named for the run: the next run sweeps it
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_forkserver() -> None:
    """Start the forkserver's imports now, in the background, so they overlap the run's own set-up."""
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker

    make_context()
    # Started with SIGINT blocked, which it keeps across exec, and so do the workers it forks: a terminal's
    # Ctrl-C reaches the whole process group, and the parent alone decides what it means. Without this a Ctrl-C
    # during the preload printed the forkserver's traceback. Blocked, not ignored: a Ctrl-C that lands in this
    # window stays pending here and is raised when the mask is restored (ignoring it lost it: the run went on).
    # The resource tracker first: starting it unblocks SIGINT in this thread (multiprocessing's own mask dance).
    multiprocessing.resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
