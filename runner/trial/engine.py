"""Run exactly one trial: state -> MCP server -> agent -> verifier -> record.

This is what ``mcpfleet trial`` runs in a pod and what each warm worker of ``mcpfleet run`` runs
locally. A trial owns everything it touches (its folder, its server process, its environment passed
explicitly, its API key as a value), so any number can run side by side. Cancellation (Ctrl-C, pod
deletion) writes no record: a trial is either recorded whole or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any, cast

from mcpfleet.runner._util import tmpdirs
from mcpfleet.runner.agent import loop as agents
from mcpfleet.runner.agent import transcript
from mcpfleet.runner.agent.conversation import MCPFLEET, MCPMARK
from mcpfleet.runner.agent.metrics import TrialMetrics
from mcpfleet.runner.agent.react import run_react_agent
from mcpfleet.runner.environment.invocation import shown_invocation
from mcpfleet.runner.environment.mcp_client import (
    AbandonedCalls,
    connect_fifo,
    connect_http,
    connect_stdio,
    server_info,
    tools_digest,
)
from mcpfleet.runner.environment.verifier import run_verifier, verifier_command
from mcpfleet.runner.llm.faults import one_line
from mcpfleet.runner.llm.target import api_key, llm_target
from mcpfleet.runner.results.outcome import PROVIDER_ERROR, classify
from mcpfleet.runner.results.records import (
    MCPMarkFacts,
    ServerFingerprint,
    Timings,
    Totals,
    TrialResult,
    VerifierRecord,
    dumps,
    dumps_mcpmark,
    harness_id,
    mcpmark_error_message,
    mcpmark_meta,
    messages_json,
    now_iso,
    redact,
    redact_text,
    redact_values,
    service_label,
)
from mcpfleet.runner.results.store import ResultStore, record_unless_finished
from mcpfleet.runner.services import SERVICES, Service, TrialEnv, service_of
from mcpfleet.runner.services.base import EnvironmentLost, GradingRefused
from mcpfleet.runner.spec import mcpmark_protocol
from mcpfleet.runner.spec.evalrun import AgentKind
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.spec.trial import TrialContext, TrialSpec
from mcpfleet.runner.tasks.discovery import find_task
from mcpfleet.runner.toolcalls.models import SCHEMA_VALID

logger = logging.getLogger(__name__)
LOG_LIMIT = 64 * 1024
FINGERPRINT_TIMEOUT_S = 5.0  # a tools/list the agent did not make, after it: a server that hangs is not waited for


def _totals(run: transcript.AgentRun) -> Totals:
    calls = run.tool_calls
    costs = [t.cost_usd for t in run.turns if t.cost_usd is not None]
    return Totals(
        # Responses, MCPMark's turn_count (what its aggregators average): an LLM call that failed for good, or
        # that the run's time cut off, is in ``turns`` (its retries, its wait) but is no turn of the model's.
        turns=run.responses,
        tool_calls=len(calls),
        tool_errors=sum(c.is_error for c in calls),
        malformed_tool_calls=sum(c.malformed for c in calls),
        llm_retries=sum(t.retries for t in run.turns),
        input_tokens=sum(t.input_tokens for t in run.turns),
        output_tokens=sum(t.output_tokens for t in run.turns),
        reasoning_tokens=sum(t.reasoning_tokens for t in run.turns),
        cached_tokens=sum(t.cached_tokens for t in run.turns),
        cost_usd=sum(costs) if costs else None,
        call_classes=transcript.counts(run),
    )


class AfterFirstCall:
    """An MCP session that calls ``hook`` once, when its first tool call has returned (or ``fire`` is called)."""

    def __init__(self, session: Any, hook: Callable[[], None]) -> None:
        self._session = session
        self._hook: Callable[[], None] | None = hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self._session.call_tool(*args, **kwargs)
        finally:
            self.fire()

    def fire(self) -> None:
        hook, self._hook = self._hook, None
        if hook is not None:
            hook()


class ToolGate:
    """An MCP session without the service's refused tools and calls (``Service.refused_call``): left out of the
    list, and a call by name (an agent that calls whatever the model names, as MCPMark's does) answered as a
    tool error without reaching the server."""

    def __init__(self, session: Any, service: Service, state_dir: Path) -> None:
        self._session, self._service, self._state_dir = session, service, state_dir
        self.listed: list[Any] | None = None  # the server's own first tools/list, before refused tools go

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def list_tools(self, *args: Any, **kwargs: Any) -> Any:
        listed = await self._session.list_tools(*args, **kwargs)
        if self.listed is None:
            self.listed = list(listed.tools)
        kept = [t for t in listed.tools if t.name not in self._service.refused_tools]
        return listed.model_copy(update={"tools": kept})

    async def call_tool(self, name: str, arguments: Any = None, *args: Any, **kwargs: Any) -> Any:
        why = self._service.refused_call(name, arguments)
        if why is not None:
            from mcp.types import CallToolResult, TextContent

            return CallToolResult(content=[TextContent(type="text", text=why)], is_error=True)
        arguments = self._service.tool_arguments(arguments, self._state_dir)
        return await self._session.call_tool(name, arguments, *args, **kwargs)

    async def fingerprint(self) -> ServerFingerprint:
        """The server the trial measured: initialize's serverInfo and its tools' digest (listed now if the agent
        never listed them: the oracle agent)."""
        name, version = server_info(self._session)
        try:
            tools = self.listed
            if tools is None:
                tools = list((await asyncio.wait_for(self._session.list_tools(), FINGERPRINT_TIMEOUT_S)).tools)
        except Exception:  # noqa: BLE001 - a server that went with the agent: named, not digested
            return ServerFingerprint(name=name, version=version)
        return ServerFingerprint(name=name, version=version, tools=len(tools), tools_digest=tools_digest(tools))


async def _run_agent(
    spec: TrialSpec,
    task: Task,
    env: TrialEnv,
    ctx: TrialContext,
    log: Any,
    timings: Timings,
    notes: list[str],
    service: Service,
    seen: list[ServerFingerprint],
) -> transcript.AgentRun:
    if env.prompt:  # a declared service's prompt: part of the task as the model reads it
        task = task.with_prompt(env.prompt)
    if spec.agent == AgentKind.noop:
        return agents.run_noop_agent(task)
    state_dir = env.state_dir
    async with AsyncExitStack() as stack:
        ended: list[float] = []  # when the agent ended: stopping the server (and a browser) after it is teardown

        def stopped() -> None:
            if ended:
                timings.teardown += time.perf_counter() - ended[0]

        stack.callback(stopped)  # the stack's last exit: after the session and the server are gone
        if spec.agent != AgentKind.oracle:
            from mcpfleet.runner.llm import client as llm  # noqa: F401 - LiteLLM's import (~2 s in a fresh pod) is paid before the run's clock
        t = time.perf_counter()
        # The run's timeout counts the server's start and list_tools, as MCPMark's wait_for does (not LiteLLM's
        # import: MCPMark's modules import it before). A warm spare or a pod's sidecar is up already.
        clock = asyncio.get_running_loop().time()
        if ctx.mcp_fifo is not None:
            session = await stack.enter_async_context(connect_fifo(ctx.mcp_fifo, ctx.mcp_container or "mcp"))
        elif ctx.mcp_url or env.url:
            session = await stack.enter_async_context(connect_http(ctx.mcp_url or str(env.url)))
        elif ctx.warm is not None:
            stack.callback(ctx.warm.release)  # it stops as the agent ends; the trial waits for it before the verifier
            session = await ctx.warm.session()  # the wait, not the boot: that ran while the last trial did
            timings.spare_mcp_start, timings.spare_started = ctx.warm.boot.mcp_start, ctx.warm.boot.started
        else:
            session = await stack.enter_async_context(connect_stdio(env.server, log, cwd=state_dir))
        timings.mcp_start = time.perf_counter() - t
        reports_error = service.result_is_error
        gate = ToolGate(session, service, state_dir)
        session = cast(Any, gate)

        async def fingerprint() -> None:
            seen.append(await gate.fingerprint())

        stack.push_async_callback(fingerprint)  # after the agent, before its server stops
        if ctx.on_first_call is not None:
            hooked = AfterFirstCall(session, ctx.on_first_call)
            stack.callback(hooked.fire)  # an agent that called no tool: at its end
            session = cast(Any, hooked)
        t = time.perf_counter()
        label = service_label({"service": spec.service, "variant": spec.variant})
        metrics = TrialMetrics(spec.run, spec.model.name, label) if ctx.metrics else None
        abandoned = AbandonedCalls()  # this agent run's tool calls still running past their timeout
        try:
            if spec.agent == AgentKind.oracle:
                replay = ctx.replay
                return await agents.run_oracle_agent(
                    session,
                    task,
                    str(state_dir),
                    metrics=metrics,
                    tool_timeout_s=spec.limits.tool_call_timeout_seconds,
                    steps=replay.steps if replay else None,
                    answer=replay.answer if replay else None,
                    reports_error=reports_error,
                )
            from mcpfleet.runner.llm import client as llm

            lim = spec.limits
            target = llm_target(spec.model, spec, ctx)
            target.log = notes  # failed LLM attempts and final tracebacks: the trial's log, never result.json
            if metrics is not None:
                target.on_fault = metrics.llm_fault
            try:
                if spec.agent == AgentKind.react:
                    return await run_react_agent(
                        session,
                        task,
                        target,
                        max_turns=lim.max_turns,
                        timeout_s=lim.timeout_seconds,
                        tool_timeout_s=lim.tool_call_timeout_seconds,
                        metrics=metrics,
                        abandoned=abandoned,
                        started=clock,
                    )
                return await agents.run_llm_agent(
                    session,
                    task,
                    target,
                    conversation=MCPFLEET if spec.agent == AgentKind.mcpfleet else MCPMARK,
                    max_turns=lim.max_turns,
                    timeout_s=lim.timeout_seconds,
                    tool_timeout_s=lim.tool_call_timeout_seconds,
                    metrics=metrics,
                    abandoned=abandoned,
                    started=clock,
                    reports_error=reports_error,
                )
            finally:
                await llm.close(target)
        finally:
            await abandoned.end()  # tool calls still running past their timeout end with the agent
            timings.agent = time.perf_counter() - t
            ended.append(time.perf_counter())


async def _judge_calls(
    spec: TrialSpec, run: transcript.AgentRun, ctx: TrialContext, notes: list[str], secrets: list[str]
) -> None:
    """The named judge classifies the trial's schema-valid calls (call_classes.py). A judge that fails leaves
    them schema_valid and says why in trial.log: it annotates the trial, it never fails it."""
    if run.classifier is None or not any(c.call_class == SCHEMA_VALID for c in run.tool_calls):
        return
    from mcpfleet.runner.toolcalls.suite import make_judge

    env = ctx.env if ctx.env is not None else os.environ
    try:
        judge = make_judge(spec.judge, env, spec=spec)
    except Exception as exc:  # noqa: BLE001 - e.g. a paced judge with no pace store: not the trial's failure
        notes.append(f"judge not started; calls stay schema_valid: {one_line(exc, secrets)}")
        return
    if judge is None:
        return
    secrets.append(judge.target.api_key or "")
    try:
        n = await transcript.judge_calls(run, run.classifier, judge, spec.trial_id)
        notes.append(f"judge {judge.target.model}: {n} call(s) judged ({judge.stats.cache_hits} from its cache)")
    except Exception as exc:  # noqa: BLE001 - the judge's failure is not the trial's
        notes.append(f"judge {judge.target.model} failed; calls stay schema_valid: {one_line(exc, secrets)}")
    finally:
        await judge.aclose()


async def _close(environment: AsyncExitStack) -> None:
    """Remove the trial's environment; a cancellation arriving meanwhile waits for it, so nothing (no cloned
    database) is left behind. A failed removal does not change the trial's outcome: it is logged, and the
    run's resource (the cluster) goes at the end of the run anyway."""
    closing = asyncio.ensure_future(environment.aclose())
    try:
        await asyncio.shield(closing)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await closing
        raise
    except Exception as exc:  # noqa: BLE001
        logger.warning("trial environment teardown failed: %s: %s", type(exc).__name__, exc)


def _find(spec: TrialSpec) -> Task:
    """The trial's task, found where it was planned."""
    return find_task(Path(spec.tasks_root), spec.task_id, Path(spec.states_path) if spec.states_path else None)


async def run_trial(
    spec: TrialSpec, store: ResultStore, ctx: TrialContext | None = None, infra_attempt: int = 1
) -> TrialResult:
    """Run one trial and store its record. Infrastructure failures become an ``infra_error`` record."""
    ctx = ctx or TrialContext()
    own = SERVICES.get(spec.service)
    if own is not None and own.owns_trials:  # a suite without MCP server or verifier (toolcall) runs its own
        if ctx.warm is not None:
            await ctx.warm.close()
        return await own.run_trial(spec, store, ctx, infra_attempt, lambda: _find(spec))
    started, t_total, wall_start = now_iso(), time.perf_counter(), time.time()
    timings = Timings()
    if ctx.warm is not None and (
        ctx.warm.service != spec.service
        or ctx.warm.variant != spec.server
        or ctx.mcp_url
        or ctx.mcp_fifo
        or ctx.state_dir
    ):
        await ctx.warm.close()
        ctx = TrialContext(**{**ctx.__dict__, "warm": None})
    workdir = ctx.warm.workdir if ctx.warm else tmpdirs.make()
    secrets = [api_key(spec.model, ctx.env if ctx.env is not None else os.environ) or ""]
    run: transcript.AgentRun | None = None
    infra: str | None = None
    infra_type: str | None = None
    notes: list[str] = []  # the trial's log (trial.log): what went wrong, in detail
    verifier = VerifierRecord()
    seen: list[ServerFingerprint] = []  # the server the agent's session reached
    task: Task | None = None
    state_failed = False
    # The trial's environment (its state, e.g. a cloned database) is removed before the record is written, so
    # the record carries the teardown's time, and also when the trial fails or is cancelled (see finally).
    environment = AsyncExitStack()
    try:
        log = ctx.warm.log if ctx.warm else open(workdir / "mcp_server.log", "w+b")  # noqa: SIM115 - closed below
        env: TrialEnv | None = None
        try:
            task = _find(spec)
            service = service_of(task.service, spec.tasks_root, spec.server)
            state_dir = ctx.state_dir or workdir / "state"
            t = time.perf_counter()
            claimed: AbstractAsyncContextManager[TrialEnv]
            try:
                if ctx.warm is not None:
                    if not ctx.warm.fits(task, spec.server):
                        raise RuntimeError(f"the worker's spare {ctx.warm.service} server cannot serve {task.id}")
                    claimed = ctx.warm.environment(task)
                else:
                    resource = ctx.resources.get(service.name)
                    claimed = service.environment(task, state_dir, resource, materialised=ctx.state_dir is not None)
                env = await environment.enter_async_context(claimed)
            except Exception:
                state_failed = True  # MCPMark records a failed state setup apart from an agent failure
                raise
            timings.state = time.perf_counter() - t
            run = await _run_agent(spec, task, env, ctx, log, timings, notes, service, seen)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - anything outside the agent's control is infrastructure
            infra = one_line(exc, secrets)
            infra_type = infra.split(":", 1)[0]
            notes.append("infrastructure error:\n" + "".join(traceback.format_exception(exc)).rstrip())
        if task is not None and run is not None and env is not None:
            messages_path = workdir / "messages.json"
            messages_path.write_bytes(dumps_mcpmark(messages_json(run.messages, raw=run.raw_messages)))
            try:
                # Nothing of the agent's runs on under its verifier: its server (a warm spare's too: its stop no
                # longer overlaps the verifier), what the environment stops (quiesce), then grading (issue 48).
                t = time.perf_counter()
                if ctx.warm is not None:
                    await ctx.warm.stop()
                if env.quiesce is not None:
                    await env.quiesce()
                graded = await env.grading() if env.grading is not None else {}
                timings.teardown += time.perf_counter() - t
                verifier_env = {**env.verifier_env, **graded, "MCP_MESSAGES": str(messages_path)}
                if service.messages_dir_env:  # MCPMark's name for the folder holding messages.json, if it sets one
                    verifier_env[service.messages_dir_env] = str(messages_path.parent)
                v = await run_verifier(
                    task.verifier, verifier_env, env.verifier_args, spec.limits.verifier_timeout_seconds
                )
                if v.exit_code != 0 and env.recheck is not None:
                    await env.recheck()  # a verifier that failed because its server died under it measured nothing
            except EnvironmentLost as exc:  # a site died or hung under the agent: not the model's failure
                infra, infra_type = str(exc), type(exc).__name__
            except GradingRefused as exc:  # the agent left nothing a verifier can be run on cleanly: its failure
                verifier = VerifierRecord(stderr=f"mcpfleet: not graded: {exc}")
                notes.append(f"not graded: {exc}")
            except OSError as exc:
                infra, infra_type = f"verifier could not start: {exc}", type(exc).__name__
            else:
                timings.verify = v.duration_s
                places = {"{trial}": workdir, "{state}": env.state_dir, "{task}": task.path}
                command, shown_env = shown_invocation(task.verifier, env.verifier_args, verifier_env, places)
                verifier = VerifierRecord(
                    exit_code=v.exit_code,
                    timed_out=v.timed_out,
                    duration_s=v.duration_s,
                    stdout=v.stdout,
                    stderr=v.stderr,
                    command=command,
                    env=shown_env,
                )
        t = time.perf_counter()
        if ctx.warm is not None:
            await ctx.warm.stop()  # released when the agent ended: this waits only for what is left of its exit
        await _close(environment)
        timings.teardown += time.perf_counter() - t
        if env is not None:
            notes.extend(env.notes)
        if run is not None and spec.judge is not None:
            await _judge_calls(spec, run, ctx, notes, secrets)
        run = run or transcript.AgentRun(messages=[])
        calls = run.tool_calls
        # A trial its provider cut short measured nothing of the model, unless its end state passes already: MCPMark
        # verifies whatever the agent left and records that pass (base/task_manager.py ``execute_task``), and so
        # does mcpfleet once the model had answered (a state that passes untouched is the task's fault). The
        # record still says the provider failed (stop_reason, error). A configuration error never scores.
        credited = run.stop_reason in (transcript.STOP_PROVIDER, transcript.STOP_BUDGET) and run.responses > 0
        whole = infra is None and (
            run.stop_reason not in (transcript.STOP_PROVIDER, transcript.STOP_CONFIG, transcript.STOP_BUDGET)
            or credited
        )
        passed = whole and verifier.exit_code == 0
        # meta.json's error_message, as MCPMark's evaluator would record this trial.
        agent_error = (
            mcpmark_protocol.render("agent_failed_error", error=infra)
            if infra and not state_failed
            else None
            if run.stop_reason in transcript.UNSEEN_BY_MCPMARK
            else run.mcpmark_error or run.error
        )
        meta_error = mcpmark_error_message(agent_error, spec.service, state_failed=state_failed or task is None)
        failure = classify(
            passed=passed,
            stop_reason=run.stop_reason,
            tool_calls=len(calls),
            malformed_calls=sum(c.malformed for c in calls),
            last_call_malformed=bool(calls and calls[-1].malformed),
            final_text=run.final_text,
            infra_error=infra is not None,
            error_message=meta_error,
        )
        error = infra or run.error
        if failure == PROVIDER_ERROR and run.stop_reason not in (transcript.STOP_PROVIDER, transcript.STOP_CONFIG):
            rerun = mcpmark_protocol.retryable_pattern(meta_error)
            error = f"{error} (not scored: MCPMark runs a failed task again when its error_message holds {rerun!r})"
            notes.append(f"not scored: meta.json's error_message holds MCPMark's retryable pattern {rerun!r}")
        timings.llm_wait = run.llm_seconds
        result = TrialResult(
            **spec.record_identity(),
            harness=harness_id(),
            protocol=mcpmark_protocol.version() if spec.agent in (AgentKind.mcpmark, AgentKind.react) else None,
            provider_model=run.run_model,
            passed=passed,
            failure=failure,
            stop_reason=None if infra else run.stop_reason,
            error=redact_text(error, secrets),
            error_type=infra_type if infra else run.error_type,
            verifier=verifier,
            server=seen[0] if seen else None,
            totals=_totals(run),
            turns=run.turns_json(),
            infra_attempts=infra_attempt,
            started_at=started,
        )
        t = time.perf_counter()
        timings.total = time.perf_counter() - t_total  # provisional, for meta.json; final value below
        result.timings, result.finished_at = timings, now_iso()
        log.seek(0)
        server_log = log.read(LOG_LIMIT)
        facts = MCPMarkFacts(
            task_name=task.mcpmark_name if task else spec.task_id,
            timeout=spec.limits.timeout_seconds,
            started=wall_start,
            finished=time.time(),
            turn_count=None if state_failed or task is None else run.responses,
            run_model=run.run_model,
            agent_error=agent_error,
            state_failed=state_failed or task is None,
            verifier_ran=verifier.exit_code is not None or verifier.timed_out,
            verifier_command=tuple(verifier_command(task.verifier, env.verifier_args if env else None)) if task else (),
            verifier_timeout=spec.limits.verifier_timeout_seconds,
        )
        # Keys are redacted from the JSON files' values (never from the fields that name the record: see
        # records.IDENTITY_FIELDS) and from the logs' bytes.
        files = {
            "messages.json": dumps_mcpmark(redact_values(messages_json(run.messages, raw=run.raw_messages), secrets)),
            "meta.json": dumps_mcpmark(
                redact_values(mcpmark_meta(result, facts, spec.model.params.litellm_kwargs()), secrets)
            ),
        }
        logs = {"mcp_server.log": server_log} if server_log else {}
        if notes:
            logs["trial.log"] = ("\n".join(notes) + "\n").encode("utf-8", errors="replace")
        files |= {k: redact(v, secrets) for k, v in logs.items()}

        def record() -> bytes:
            # result.json carries the record phase's time up to its own (single, small) write.
            timings.record = time.perf_counter() - t
            timings.total = time.perf_counter() - t_total
            result.timings, result.finished_at = timings, now_iso()
            return dumps(redact_values(result.model_dump(mode="json"), secrets))

        async def write() -> None:
            kept = await asyncio.to_thread(record_unless_finished, store, spec.trial_id, spec.spec_hash, files, record)
            if kept is not None:
                logger.warning(
                    "%s: not stored: a scored record of this trial is stored already (started %s, passed %s)",
                    spec.trial_id,
                    kept.get("started_at"),
                    kept.get("passed"),
                )

        # A finished trial is recorded whole: a cancellation arriving now waits for the (short) writes,
        # so no folder is ever left with files but no result.json.
        writing = asyncio.ensure_future(write())
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            await writing
            raise
        return result
    finally:
        await _close(environment)
        if ctx.warm is not None:
            await ctx.warm.close()
        try:
            log.close()
        except NameError:
            pass
        shutil.rmtree(workdir, ignore_errors=True)
