"""``mcpfleet run``: an EvalRun on one machine, processes instead of pods, a folder instead of S3.

Trials run concurrently in warm worker processes under the spec's total and per-model limits, models
interleaved. Re-running the same file resumes: a trial whose result.json carries the same spec hash
is never run again (unless it measured nothing: an infra, provider or config error), and a spec change
that would contradict recorded trials is refused. A model whose trial meets a configuration error (bad
key, unknown model, unreachable apiBase), or whose trials spend its retry budget, launches nothing more:
the run finishes the other models and reports it as stopped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import hashlib
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet.runner._util import filemodes, tmpdirs
from mcpfleet.runner._util.lifeline import interrupts_held
from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.launch.worker import (
    TrialCancelled,
    WorkItem,
    init_worker,
    make_context,
    run_item,
    start_forkserver,
)
from mcpfleet.runner.launch.workerpool import WorkerSlots
from mcpfleet.runner.llm.warmup import warm_models
from mcpfleet.runner.plan.expand import plan, trial_deadline
from mcpfleet.runner.report.summary import PLAN_FILE, build_summary, plan_file
from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, CONFIG_ERROR, INFRA_ERROR, PROVIDER_ERROR, is_scored
from mcpfleet.runner.results.records import now_iso
from mcpfleet.runner.results.store import (
    LocalStore,
    RecordNotStored,
    ResultStore,
    S3Store,
    StoreConfig,
    StoreError,
    store_config,
)
from mcpfleet.runner.services import run_resources, sweep_leftovers
from mcpfleet.runner.spec.evalrun import EvalRun, retry_wait
from mcpfleet.runner.spec.load import SpecError, spec_hash
from mcpfleet.runner.spec.trial import TrialSpec


class RunLost(RuntimeError):
    """A run-scoped resource is gone for good (e.g. the run's PostgreSQL server kept dying): the run stops at
    once, its finished trials kept, instead of ending every trial left as an infrastructure error."""


class LostWatch:
    """Where a resource's own thread says why the run cannot go on; wakes the scheduler's loop (thread-safe)."""

    def __init__(self) -> None:
        self.why: str | None = None
        self._wake: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def __call__(self, why: str) -> None:
        with self._lock:
            if self.why is None:
                self.why = why
            wake = self._wake
        if wake is not None:
            wake()

    def attach(self, wake: Callable[[], None]) -> None:
        with self._lock:
            self._wake = wake
            pending = self.why is not None
        if pending:
            wake()


class RunRefused(RuntimeError):
    """The run cannot start as asked (changed spec, missing key); the message says how to proceed."""


LOCK_NAME = ".mcpfleet.lock"


@contextlib.contextmanager
def run_lock(store: ResultStore) -> Iterator[None]:
    """One ``mcpfleet run`` of a local run folder at a time: a second one would run every unfinished trial again
    beside the first, over its concurrency, and could remove trial folders the first is writing. The lock is the
    kernel's (flock on a file in the run folder): it goes with its process, SIGKILL included. An s3:// run root
    gets a lease object instead (s3lease.py), which a killed run leaves behind for its time to live."""
    if isinstance(store, S3Store):
        from mcpfleet.runner.launch.s3lease import LeaseHeld, S3Lease

        try:
            with S3Lease(store):
                yield
        except LeaseHeld as exc:  # (only taking the lease raises it)
            raise RunRefused(str(exc)) from None
        return
    if not isinstance(store, LocalStore):
        yield
        return
    try:
        store.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in its place, a read-only disk: one line, not a traceback
        raise RunRefused(
            f"{store.root}: the run folder cannot be made ({exc.strerror or exc}); remove what is there or give "
            "another spec.output.uri or metadata.name"
        ) from None
    if (store.root / "trials").is_symlink():
        raise RunRefused(
            f"{store.root / 'trials'} is a symbolic link: a run writes its records only into its own folder; put "
            "the folder it points to in its place, or pass --new-run"
        )
    lock = store.root / LOCK_NAME
    try:  # never through a link: a run folder from elsewhere with a lock linked to /etc/passwd had it truncated
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise RunRefused(f"{lock}: cannot be opened as the run's lock file ({exc.strerror}); remove it") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunRefused(f"{lock}: is not a regular file; remove it")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise RunRefused(
                f"{store.root}: another `mcpfleet run` (pid {holder}) is running this run; wait for it to end or "
                "stop it, then run the same command again (finished trials are kept), or pass --new-run for a "
                "separate run"
            ) from None
        except OSError as exc:  # (a file system without locks)
            raise RunRefused(
                f"{lock}: cannot be locked ({exc.strerror or exc}); give a local spec.output.uri"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:  # (a full disk)
            raise RunRefused(f"{lock}: cannot be written ({exc.strerror or exc}); free space or move the run") from None
        with private_while_running(store.root):
            yield
    finally:
        os.close(fd)  # (closing releases the lock)


@contextlib.contextmanager
def private_while_running(root: Path) -> Iterator[None]:
    """The run folder is its user's alone while the run writes it (0700): transcripts of a run in progress are
    read by no other local user, whatever their files' modes (issue 48). At the end, Ctrl-C included, it gets the
    mode it had again (a plain mkdir's under the umask, after a killed run), so teammates and web servers read
    finished runs; a run that was SIGKILLed stays private until its next invocation ends."""
    try:
        before = stat.S_IMODE(os.stat(root).st_mode)
        os.chmod(root, 0o700)
    except OSError:  # another user's folder (theirs to protect), or a file system without modes
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # (0700 before: left so by a killed run, or the umask's own)
            os.chmod(root, filemodes.folder_mode() if before == 0o700 else before)


@dataclass
class RunState:
    todo: list[TrialSpec]
    skipped: int
    skipped_cost: float = 0.0  # what the skipped (finished) trials' records say they cost: the progress line's
    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    retries: int = 0
    stopped: dict[str, str] = field(default_factory=dict)  # model -> why its launches stopped
    unstored: str | None = None  # why the first record could not be stored: then nothing more was launched
    not_run: list[str] = field(default_factory=list)  # trials left unlaunched because of it


# Added to a trial's agent and verifier timeouts for its launcher-side deadline (set-up, teardown, a worker's
# start; plan.trial_deadline): the operator's pod deadline is the same sum with its podGraceSeconds.
TRIAL_GRACE_SECONDS = 300


def worker_deadline(t: TrialSpec) -> tuple[float, str]:
    """Seconds a trial's worker may hold it before the launcher kills the worker, and the sum in words. Every
    timeout of a trial lives inside its worker: a wedged worker (SIGSTOPped, a hung mount, a deadlock) would
    otherwise hold the run for ever."""
    return trial_deadline(t, TRIAL_GRACE_SECONDS)


def check_credentials(run: EvalRun, env: dict[str, str] | os._Environ[str]) -> None:
    from mcpfleet.runner.launch.preflight import credential_problems

    if problems := credential_problems(run, env):
        raise SpecError(problems)


def reconcile_records(run: EvalRun, trials: list[TrialSpec], store: ResultStore) -> RunState:
    """Decide what to run: skip finished trials, refuse contradictions, rerun infra errors and leftovers."""
    discarded = store.discard_unfinished()
    previous = store.read_json("run.json")
    # run.json of another shape (a list, no spec_hash: edited or from elsewhere) says nothing: as if missing.
    was = previous.get("spec_hash") if isinstance(previous, dict) else None
    conflicts = []
    todo, skipped, skipped_cost = [], 0, 0.0
    records = {r.get("trial_id"): r for r in store.iter_results()}  # one listing, not a GET per trial
    for t in trials:
        rec = records.get(t.trial_id)
        if rec is None:
            todo.append(t)
        elif not is_scored(rec.get("failure")):
            # Infra, provider and config errors measured nothing, so they neither count nor conflict (fixing
            # their cause, e.g. adding a missing state or the right key, may change the trial's hash): run them.
            todo.append(t)
        elif rec.get("spec_hash") != t.spec_hash:
            conflicts.append(t.trial_id)
        else:
            skipped += 1
            skipped_cost += record_cost(rec) or 0.0
    if conflicts:
        now = spec_hash(run)
        if isinstance(was, str) and was != now:
            what = f"a different spec (was {was[:64]}, now {now})"
        else:
            what = "different task content (a task's files or initial state changed since)"
        raise RunRefused(
            f"run '{run.name}' in {store.location()} was recorded with {what}: "
            f"{plural(len(conflicts), 'recorded trial')} would mean something else now, e.g. {conflicts[0]}.\n"
            f"Give the changed EvalRun a new metadata.name, pass --new-run to write it under a fresh name, "
            f"or move the old folder away. (Adding models or attempts is fine; changing a model, limits, "
            f"the agent or a task is not.)"
        )
    if discarded:
        print(f"discarded {plural(discarded, 'unfinished trial folder')} from an interrupted run")
    return RunState(todo=todo, skipped=skipped, skipped_cost=skipped_cost)


def record_cost(rec: dict[str, Any]) -> float | None:
    """A record's priced cost (totals.cost_usd), or None: not priced, or not a number."""
    cost = (rec.get("totals") or {}).get("cost_usd") if isinstance(rec.get("totals"), dict) else None
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None


def fresh_name(base: str, config: StoreConfig, limit: int = 63) -> str:
    """``<base>-2``, ``-3``, ...: the first run name not used yet, the base cut so that the name stays a DNS label
    of at most ``limit`` characters, as the spec requires of every run name (it names pods and labels)."""
    n = 2
    while True:
        suffix = f"-{n}"
        name = base[: limit - len(suffix)].rstrip("-") + suffix
        if not config.with_name(name).open().exists():
            return name
        n += 1


@dataclass
class InFlight:
    trial: TrialSpec
    attempt: int
    deadline: float  # time.monotonic() past which its worker is killed
    killed: str | None = None  # why its worker was killed


class Scheduler:
    """Feeds trials to workers under the total and per-model caps; infra errors go back in the queue. A record
    that cannot be stored stops all launches (no retry of a trial can fix the store)."""

    def __init__(
        self,
        run: EvalRun,
        state: RunState,
        pool: WorkerSlots,
        store: StoreConfig,
        scripted_url: str | None,
        on_done: Any,
        env: dict[str, str] | None = None,
        resources: dict[str, Any] | None = None,
        lost: LostWatch | None = None,
        stored: ResultStore | None = None,
        ledger: Any = None,
    ):
        self.run, self.state, self.pool = run, state, pool
        self.stored = stored  # where a worker that died may have stored its trial's record first
        self.lost = lost or LostWatch()
        self.store, self.scripted_url, self.on_done = store, scripted_url, on_done
        self.env = env or {}
        self.resources = resources or {}
        self.queue: collections.deque[tuple[TrialSpec, int]] = collections.deque((t, 1) for t in state.todo)
        self.delayed: list[tuple[float, TrialSpec, int]] = []
        self.in_flight: dict[str, int] = collections.defaultdict(int)
        self.llm_retries: dict[str, int] = collections.defaultdict(int)  # per model, this invocation
        self.total = run.spec.concurrency.total
        self.ledger = ledger  # the run's budgets (ledger.Ledger), when some budget applies
        self.on_spend: Callable[[float, float | None], None] | None = None  # the progress line's
        self.on_flight: Callable[[int], None] | None = None  # told the number in flight whenever it changes

    def model_cap(self, model: str) -> int:
        m = next(m for m in self.run.spec.models if m.name == model)
        return m.concurrency or self.run.spec.concurrency.per_model or self.total

    def _next(self) -> tuple[TrialSpec, int] | None:
        for i, (t, n) in enumerate(self.queue):
            if self.in_flight[t.model.name] < self.model_cap(t.model.name):
                del self.queue[i]
                return t, n
        return None

    async def run_all(self) -> None:
        """Raises RunLost when a run-scoped resource is lost for good (the trials in flight are left to close)."""
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:  # from the resource's thread
            loop.call_soon_threadsafe(woken.set)

        self.lost.attach(wake)
        waker = asyncio.ensure_future(woken.wait())
        try:
            if self.ledger is not None and self.stored is not None:
                await self.seed_ledger()
                await self.save_spend()
            await self._run_all(loop, waker)
        finally:
            waker.cancel()
            if self.ledger is not None:
                await self.save_spend()
                from mcpfleet.runner.llm.pace import close_clients

                await close_clients()

    async def seed_ledger(self) -> None:
        """Start the ledgers at what earlier invocations of the run spent; a store that cannot be reached is waited
        for (launching without it could spend past a budget), and said once."""
        from mcpfleet.runner.llm.pace import store_errors

        assert self.ledger is not None and self.stored is not None
        said = False
        while True:
            try:
                await self.ledger.seed(self.stored)
                return
            except store_errors() as exc:
                if not said:
                    print(f"the pace store cannot be reached ({type(exc).__name__}); waiting for it", flush=True)
                    said = True
                await asyncio.sleep(1.0)

    async def save_spend(self) -> None:
        """Keep the ledgers in the run folder (a resume starts from them); stop what a spent budget covers."""
        if self.ledger is None or self.stored is None:
            return
        try:
            spent = await self.ledger.save(self.stored)
        except Exception:  # noqa: BLE001 - the store's outage is the trials' to wait out; kept at the next one
            return
        if self.on_spend is not None and spent:
            self.on_spend(*self.ledger.headline(spent))
        for _which, model, why in self.ledger.exhausted(spent):
            for m in [model] if model else [m.name for m in self.run.spec.models]:
                self.stop_model(m, why)

    async def _run_all(self, loop: asyncio.AbstractEventLoop, waker: asyncio.Future[Any]) -> None:
        running: dict[asyncio.Future[Any], InFlight] = {}
        pool_futures: dict[asyncio.Future[Any], Future[Any]] = {}  # the pool's own future of each (to kill)
        while self.queue or self.delayed or running:
            if self.lost.why is not None:
                raise RunLost(self.lost.why)
            now = time.monotonic()
            for item in [d for d in self.delayed if d[0] <= now]:
                self.delayed.remove(item)
                self.queue.appendleft((item[1], item[2]))
            while sum(self.in_flight.values()) < self.total and (nxt := self._next()):
                t, n = nxt
                work = WorkItem(
                    t.model_dump_json(),
                    self.store,
                    self.scripted_url,
                    n,
                    self.env,
                    more_queued=bool(self.queue or self.delayed),
                    resources=self.resources,
                )
                submitted = self.pool.submit(run_item, work)
                fut = asyncio.wrap_future(submitted, loop=loop)
                running[fut] = InFlight(t, n, time.monotonic() + worker_deadline(t)[0])
                pool_futures[fut] = submitted
                self.in_flight[t.model.name] += 1
                self.flying()
            for fut, inf in running.items():
                if inf.killed is None and now >= inf.deadline:
                    # Its worker is wedged: killed as an OOM kill would (its trial fails with BrokenProcessPool).
                    self.pool.kill(pool_futures[fut])
                    inf.killed = f"worker killed: the trial ran past its deadline of {worker_deadline(inf.trial)[1]}"
            due = [d[0] for d in self.delayed] + [i.deadline for i in running.values() if i.killed is None]
            wait_for = min(due, default=now + 3600) - now
            if not running:
                await asyncio.wait({waker}, timeout=max(0.0, wait_for))
                continue
            finished, _ = await asyncio.wait(
                {*running, waker}, timeout=max(0.05, wait_for), return_when=asyncio.FIRST_COMPLETED
            )
            for fut in finished:
                if fut is waker:
                    continue
                inf = running.pop(fut)
                pool_futures.pop(fut)
                t, n = inf.trial, inf.attempt
                self.in_flight[t.model.name] -= 1
                self.flying()
                try:
                    out = fut.result()
                except RecordNotStored as exc:  # the store is broken: for every trial, and no retry fixes it
                    self.store_broken(t, exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - a worker died or was stopped: infrastructure, retried
                    # (TrialCancelled here is a worker stopped from outside: a Ctrl-C of the run cancels this loop.)
                    out = self.recorded(t) or {
                        "trial_id": t.trial_id,
                        "model": t.model.name,
                        "passed": False,
                        "failure": INFRA_ERROR,
                        "error": inf.killed
                        or f"worker {'stopped' if isinstance(exc, TrialCancelled) else 'failed'}: "
                        f"{type(exc).__name__}: {exc}",
                    }
                self.charge_retries(t.model.name, int(out.get("llm_retries") or 0))
                if out["failure"] == CONFIG_ERROR:
                    self.stop_model(t.model.name, f"config_error: {out.get('error')}")
                if out["failure"] == BUDGET_EXHAUSTED:
                    self.budget_spent(t.model.name, str(out.get("error") or BUDGET_EXHAUSTED))
                if (
                    out["failure"] in (INFRA_ERROR, PROVIDER_ERROR)
                    and n <= self.run.spec.retries.limit
                    and t.model.name not in self.state.stopped
                    and self.state.unstored is None  # (a retry's record could not be stored either)
                ):
                    self.state.retries += 1
                    delay = retry_wait(self.run.spec.retries.backoff_seconds, n)
                    self.delayed.append((time.monotonic() + delay, t, n + 1))
                    continue
                self.state.done[t.trial_id] = out
                self.on_done(out)
            if self.ledger is not None and len(finished) > (waker in finished):
                await self.save_spend()

    def flying(self) -> None:
        if self.on_flight is not None:
            self.on_flight(sum(self.in_flight.values()))

    def budget_spent(self, model: str, error: str) -> None:
        """A trial cut short by a budget: no new trial of its model (the run's budget: of any model) starts."""
        from mcpfleet.runner.launch.ledger import budget_scope

        why = error if error.startswith(BUDGET_EXHAUSTED) else f"{BUDGET_EXHAUSTED}: {error}"
        for m in [model] if budget_scope(error) == "model" else [m.name for m in self.run.spec.models]:
            self.stop_model(m, why)

    def store_broken(self, t: TrialSpec, exc: RecordNotStored) -> None:
        """A finished trial whose record could not be stored: not retried, and nothing more is launched (the
        trials in flight finish); the run then ends naming the trials without a record (exit 4)."""
        out = {"trial_id": t.trial_id, "model": t.model.name, "passed": False, "failure": INFRA_ERROR}
        self.state.done[t.trial_id] = {**out, "error": f"not stored: {exc.cause}", "not_stored": True}
        self.on_done(self.state.done[t.trial_id])
        if self.state.unstored is None:
            self.state.unstored = f"records cannot be stored in {exc.location}: {exc.cause}"
        self.state.not_run += [q.trial_id for q, _ in self.queue] + [d[1].trial_id for d in self.delayed]
        self.queue.clear()
        self.delayed.clear()

    def recorded(self, t: TrialSpec) -> dict[str, Any] | None:
        """The scored record a worker stored before it died (killed between its commit and its reply): the trial
        is finished, and running it again would pay for it twice only to be thrown away."""
        if self.stored is None:
            return None
        try:
            rec = self.stored.read_result(t.trial_id)
        except Exception:  # noqa: BLE001 - unreadable (a store outage): the trial is retried as before
            return None
        if rec is None or not is_scored(rec.get("failure")) or rec.get("spec_hash") != t.spec_hash:
            return None
        return {
            "trial_id": t.trial_id,
            "model": t.model.name,
            "passed": bool(rec.get("passed")),
            "failure": rec.get("failure"),
            "error": rec.get("error"),
        }

    def charge_retries(self, model: str, retries: int) -> None:
        """Count a finished trial's LLM retries against its model's budget; stop the model when it is spent."""
        self.llm_retries[model] += retries
        budget = self.run.spec.provider.model_retry_budget
        if budget is not None and self.llm_retries[model] > budget:
            self.stop_model(
                model,
                f"its trials spent {self.llm_retries[model]} LLM retries, over provider.modelRetryBudget "
                f"({budget}): the provider is failing",
            )

    def stop_model(self, model: str, why: str) -> None:
        """Launch nothing more of this model (its queued and delayed trials stay unrun; a rerun resumes them)."""
        if model in self.state.stopped:
            return
        self.state.stopped[model] = why
        self.queue = collections.deque((t, n) for t, n in self.queue if t.model.name != model)
        self.delayed = [d for d in self.delayed if d[1].model.name != model]

    def close(self, interrupted: bool = False) -> None:
        if interrupted:
            self.pool.stop()
        self.pool.shutdown()


def _pace(run: EvalRun, stack: ExitStack, store: ResultStore) -> tuple[dict[str, str], Any]:
    """The pace store the run's trials share (the one MCPFLEET_PACE_STORE_URL names, else a private redis-server
    that dies with the run) and its budget ledgers, when some model sets rateLimit or a budget applies."""
    from mcpfleet.runner.llm.pace import RUN_SCOPE_ENV, STORE_URL_ENV, WINDOW_ENV, judge_needs_pace, needs_pace

    judge = run.spec.toolcalls.judge.lent(run.spec.models) if run.spec.toolcalls and run.spec.toolcalls.judge else None
    if not any(needs_pace(m, run.spec.budget) for m in run.spec.models) and not judge_needs_pace(
        judge, run.spec.budget
    ):
        return {}, None
    from mcpfleet.runner.launch.ledger import Ledger
    from mcpfleet.runner.launch.pacestore import PaceStoreError, local_store

    url = os.environ.get(STORE_URL_ENV)
    if not url:
        try:
            url = stack.enter_context(local_store())
        except PaceStoreError as exc:
            raise RunRefused(str(exc)) from None
    scope = hashlib.sha256(store.location().encode()).hexdigest()[:16]  # this run's folder: its own ledgers
    env = {STORE_URL_ENV: url, RUN_SCOPE_ENV: scope}
    if os.environ.get(WINDOW_ENV):
        env[WINDOW_ENV] = os.environ[WINDOW_ENV]
    return env, Ledger(run, url, scope=scope)


def _summary_on_interrupt(run: EvalRun, trials: list[TrialSpec], store: ResultStore, stopped: dict[str, str]) -> None:
    """An interrupted run's summary.json says what is recorded so far (``complete: false``) instead of what an
    earlier run left there. Never in the way of the interrupt: a failure is ignored, a second Ctrl-C skips it."""
    try:
        write_summary(run, trials, store, stopped)
    except Exception:  # noqa: BLE001 - the records are what count; the summary is rebuilt by the next run
        pass


def write_summary(
    run: EvalRun, trials: list[TrialSpec], store: ResultStore, stopped: dict[str, str] | None = None
) -> dict[str, Any]:
    summary = build_summary(run, trials, store, stopped)
    store.write_json("summary.json", summary)
    return summary


def execute(
    run: EvalRun,
    base_dir: Path,
    *,
    new_run: bool = False,
    concurrency: int | None = None,
    show_progress: bool = True,
    progress_every: float | None = None,
    order: Callable[[list[TrialSpec]], list[TrialSpec]] | None = None,
) -> tuple[dict[str, Any], Path | str]:
    """Run (or resume) an EvalRun locally; returns (summary, run folder or s3:// URI of the run root).
    ``show_progress``: the live progress bar; ``progress_every``: plain progress lines on stderr instead, at least
    every that many seconds (off a terminal). ``order``: the launch order instead of the plan's (``tasks stress``
    shuffles it).

    Raises KeyboardInterrupt on Ctrl-C, RunLost when a run-scoped resource is lost for good."""

    if concurrency:
        run = run.model_copy(
            update={
                "spec": run.spec.model_copy(
                    update={"concurrency": run.spec.concurrency.model_copy(update={"total": concurrency})}
                )
            }
        )
    from mcpfleet.runner.launch.preflight import preflight

    tasks = preflight(run, base_dir, os.environ)
    tmpdirs.sweep()  # trial folders left by runs that were killed
    sweep_leftovers()  # and their services' run-scoped leftovers (a PostgreSQL cluster's folder in /dev/shm)
    reorder = order or (lambda planned: planned)
    trials = reorder(plan(run, base_dir, tasks))
    config = store_config(run.spec.output, run.name, base_dir)  # what workers reopen: picklable
    store = config.open()
    if new_run and store.exists():
        run = run.model_copy(
            update={"metadata": run.metadata.model_copy(update={"name": fresh_name(run.name, config)})}
        )
        trials = reorder(plan(run, base_dir, tasks))
        config = config.with_name(run.name)
        store = config.open()
    with run_lock(store):
        return _execute(run, base_dir, trials, config, store, show_progress, progress_every)


def _execute(
    run: EvalRun,
    base_dir: Path,
    trials: list[TrialSpec],
    config: StoreConfig,
    store: ResultStore,
    show_progress: bool,
    progress_every: float | None = None,
) -> tuple[dict[str, Any], Path | str]:
    from mcpfleet.runner.launch.progress import Progress
    from mcpfleet.runner.launch.progress_lines import nothing_left_line

    state = reconcile_records(run, trials, store)
    try:
        store.write_json(
            "run.json",
            {
                "run": run.name,
                "spec_hash": spec_hash(run),
                "updated_at": now_iso(),
                "trials": len(trials),
                "evalrun": run.model_dump(mode="json", by_alias=True),
            },
        )
        store.write_json(PLAN_FILE, plan_file(run, trials))
    except OSError as exc:  # nothing ran yet: one line naming the folder, not a traceback
        raise StoreError(f"cannot write the run's files in {store.location()}: {exc}") from None
    progress = Progress(
        total=len(trials),
        already=state.skipped,
        enabled=show_progress,
        lines_every=progress_every,
        cost=state.skipped_cost,
    )
    if not state.todo:  # said before the table, which would otherwise look like this invocation's work
        print(nothing_left_line(len(trials), run.name, store.location()), file=sys.stderr, flush=True)
    else:
        start_forkserver()  # its seconds of imports overlap the scripted server's start and the pool's set-up
        with ExitStack() as stack:
            # Entered first, so closed last: after a Ctrl-C, further ones are held (lifeline.interrupts_held) until
            # every run resource below is stopped; a second press cut the zygote's or the model server's stop short.
            stopping = stack.enter_context(ExitStack())
            scripted_url = None
            lost = LostWatch()
            if any(m.is_scripted for m in run.spec.models):
                from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess

                roots = sorted({Path(t.tasks_root) for t in trials})
                server = ScriptedServerProcess(roots, script_base=base_dir.resolve())
                scripted_url = stack.enter_context(server)
                server.watch(lost)  # its death stops the run (exit 6), not its models as misconfigured
            workers = min(run.spec.concurrency.total, len(state.todo))
            pace_env, ledger = _pace(run, stack, store)

            mp = make_context()
            # One spare server boots at a time per two cores; the running trials keep the rest.
            gate = mp.Semaphore(max(1, (os.cpu_count() or 2) // 2))

            models = tuple(warm_models(run.spec.models))  # each worker's first LLM round trip, made at its start

            def one_worker() -> ProcessPoolExecutor:
                return ProcessPoolExecutor(1, mp_context=mp, initializer=init_worker, initargs=(gate, models))

            judge = run.spec.toolcalls.judge if run.spec.toolcalls else None
            keys = {
                name: os.environ[name]
                for name in [m.api_key_env for m in run.spec.models] + [judge.api_key_env if judge else None]
                if name and name in os.environ
            } | pace_env
            # Run-scoped resources (the PostgreSQL cluster, its server's zygote), only for the services this run's
            # trials use; started here, in the main thread, and stopped when the stack closes (Ctrl-C and SIGTERM
            # included).
            resources = stack.enter_context(run_resources({t.service for t in state.todo}, True, lost))
            stack.enter_context(progress)
            pool = WorkerSlots(workers, one_worker, retire_on=(TrialCancelled,))  # a dead worker costs its trial only
            scheduler = Scheduler(
                run, state, pool, config, scripted_url, progress.advance, keys, resources, lost, store, ledger
            )
            scheduler.on_spend = progress.spent
            scheduler.on_flight = progress.flying
            try:
                asyncio.run(scheduler.run_all())
            except (KeyboardInterrupt, RunLost):
                stopping.enter_context(interrupts_held())
                scheduler.close(interrupted=True)
                _summary_on_interrupt(run, trials, store, state.stopped)
                raise
            scheduler.close()
        tmpdirs.sweep()  # what a worker killed mid-trial (the OOM killer) left: its trial's and its spare's folders
    try:
        summary = write_summary(run, trials, store, state.stopped)
    except OSError as exc:  # a full or read-only disk: the records that were stored stay; say so, no traceback
        summary = build_summary(run, trials, store, state.stopped)
        summary["summary_error"] = f"summary.json could not be written: {exc}"
    if summary["trials_recorded"] < summary["trials_planned"]:  # say why, for `mcpfleet run`'s exit (not stored)
        unrecorded = [(tid, o) for tid, o in sorted(state.done.items()) if store.read_result(tid) is None]
        unrecorded.sort(key=lambda u: not u[1].get("not_stored"))  # the store's failures first: the cause
        summary["unrecorded"] = {tid: str(o.get("error") or "no record") for tid, o in unrecorded}
        if state.unstored is not None:  # what was never launched after the first record that could not be stored
            summary["unrecorded"] |= {tid: f"not run: {state.unstored}" for tid in sorted(state.not_run)}
            summary["store_error"] = state.unstored
    return summary, store.root if isinstance(store, LocalStore) else store.location()
