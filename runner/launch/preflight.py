"""Checks of an EvalRun against this machine, shared by ``mcpfleet validate`` and ``mcpfleet run``, so that
validate never says "valid" for a run that would fail on its first write or its first LLM call."""

from __future__ import annotations

import os
import tempfile
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic.alias_generators import to_camel

from mcpfleet.runner._util.overlap import overlap, resolved
from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.spec.evalrun import AgentKind, EvalRun
from mcpfleet.runner.spec.load import SpecError

if TYPE_CHECKING:
    from mcpfleet.runner.launch.scripted_options import ModelError, Options
    from mcpfleet.runner.spec.task import Task


def output_problem(uri: str, base_dir: Path) -> str | None:
    """Why records cannot be written under a local ``spec.output.uri`` (None when they can, or for s3://).

    Probes by creating (and removing) a file in the nearest existing folder: permission bits say nothing for
    root, and a read-only mount only shows on a write."""
    if uri.startswith("s3://"):
        return None
    target = Path(os.path.normpath(base_dir / Path(uri).expanduser()))
    shown = f"'{uri}'" + (f" (resolved: {target})" if str(target) != uri else "")
    probe = target
    while not probe.exists():
        if probe.is_symlink():
            return f"spec.output.uri: {shown}: {probe} is a dangling symbolic link; give a writable folder"
        probe = probe.parent
    if not probe.is_dir():
        where = "is a file" if probe == target else f"is under a file ({probe})"
        return f"spec.output.uri: {shown} {where}; give a folder path (created if missing)"
    try:
        fd, name = tempfile.mkstemp(prefix=".mcpfleet-probe-", dir=probe)
    except OSError as exc:
        why = exc.strerror or str(exc)
        return f"spec.output.uri: {shown} cannot be written ({why} in {probe}); give a writable folder"
    os.close(fd)
    os.unlink(name)
    return None


def key_problem(field: str, var: str, value: str | None) -> str | None:
    """Why the key in environment variable ``var`` cannot be sent, never showing it: unset, or holding a control
    character or whitespace at an end (a key pasted with a tab or a line break from a spreadsheet): sent so, it
    fails authentication, and a provider's echo of it escapes redaction once that whitespace is normalised."""
    if not value:
        return f"{field}: environment variable {var} is not set; export it before running"
    if value != value.strip() or any(unicodedata.category(c) == "Cc" for c in value):
        return (
            f"{field}: environment variable {var} holds whitespace at its start or end or a control character "
            "(a tab, a line break); export the key alone"
        )
    return None


def credential_problems(run: EvalRun, env: Mapping[str, str], *, local: bool = True) -> list[str]:
    """Unset or unusable API key variables (and, for a local run, Secret references only the operator can read)."""
    problems = []
    for i, m in enumerate(run.spec.models):
        if m.is_scripted:
            continue
        if m.api_key_env and (bad := key_problem(f"spec.models[{i}].apiKeyEnv", m.api_key_env, env.get(m.api_key_env))):
            problems.append(bad)
        if local and m.api_key_secret_ref and not m.api_key_env:
            problems.append(
                f"spec.models[{i}].apiKeySecretRef: Kubernetes Secrets are only read by the operator; "
                "locally use apiKeyEnv"
            )
    judge = run.spec.toolcalls.judge if run.spec.toolcalls else None
    if judge is not None and judge.api_key_env:
        if bad := key_problem("spec.toolcalls.judge.apiKeyEnv", judge.api_key_env, env.get(judge.api_key_env)):
            problems.append(bad)
    return problems + implicit_key_problems(run, env)


def implicit_key_problems(run: EvalRun, env: Mapping[str, str]) -> list[str]:
    """Models with neither apiKeyEnv nor apiKeySecretRef whose provider needs a key that the environment lacks
    (``openai/gpt-4o`` without OPENAI_API_KEY): LiteLLM would fail every call locally ("Missing credentials"),
    which is a configuration error, not a provider's outage. Providers that need no key (hosted_vllm, ollama)
    pass."""
    unkeyed = [(i, m) for i, m in enumerate(run.spec.models) if not m.is_scripted]
    unkeyed = [(i, m) for i, m in unkeyed if not m.api_key_env and not m.api_key_secret_ref]
    if not unkeyed or run.spec.agent in (AgentKind.oracle, AgentKind.noop):  # (the model is never called)
        return []
    from mcpfleet.runner.llm.client import litellm

    problems = []
    for i, m in unkeyed:
        try:
            found = litellm.validate_environment(model=m.model, api_base=m.api_base)
        except Exception:  # noqa: BLE001 - a model LiteLLM cannot place is model_problems' to report
            continue
        wanted = [str(k) for k in found.get("missing_keys") or []]
        if wanted and not any(env.get(k) for k in wanted):
            names = " or ".join(wanted)
            problems.append(
                f"spec.models[{i}]: '{m.model[:80]}' needs an API key ({names}) and none is given: set apiKeyEnv "
                f"to the variable holding it (e.g. apiKeyEnv: {wanted[0]}) and export it, or apiKeySecretRef for "
                "the operator"
            )
    return problems


def budget_problems(run: EvalRun) -> list[str]:
    """A budget needs a price for every model it covers: a model's own budget its model's price, the run's budget
    every model's. A model neither LiteLLM's price map nor spec.models[].pricing prices is refused, naming the
    field to add."""
    from mcpfleet.runner.llm.pricing import price_of

    problems = []
    for i, m in enumerate(run.spec.models):
        if m.budget is None and run.spec.budget is None:
            continue
        if price_of(m) is None:
            which = f"spec.models[{i}].budget" if m.budget is not None else "spec.budget"
            problems.append(
                f"spec.models[{i}].pricing: {which} is set but '{m.model[:80]}' has no known price (LiteLLM's price "
                "map lacks it); add pricing: {inputPerMillionTokens: ..., outputPerMillionTokens: ...}"
            )
    judge = run.spec.toolcalls.judge if run.spec.toolcalls else None
    if judge is not None and run.spec.budget is not None and price_of(judge.lent(run.spec.models).as_model()) is None:
        problems.append(
            f"spec.toolcalls.judge.pricing: spec.budget is set and the judge's calls count toward it, but "
            f"'{judge.model[:80]}' has no known price (LiteLLM's price map lacks it); add pricing: "
            "{inputPerMillionTokens: ..., outputPerMillionTokens: ...}"
        )
    return problems


def model_problems(run: EvalRun, base_dir: Path | None = None) -> list[str]:
    """Model strings LiteLLM cannot place (a mistyped provider prefix, a blank name): every trial would fail
    before any request, and be recorded as the model's llm_api_error. ``base_dir``: see scripted_problems."""
    problems = scripted_problems(run, base_dir)
    named: list[tuple[str, str, str | None, dict[str, Any]]] = [
        (f"spec.models[{i}]", m.model, m.api_base, m.params.litellm_kwargs())
        for i, m in enumerate(run.spec.models)
        if not m.is_scripted
    ]
    judge = run.spec.toolcalls.judge if run.spec.toolcalls else None
    if judge is not None:
        named.append(("spec.toolcalls.judge", judge.model, judge.api_base, {}))
    if not named:
        return problems
    from mcpfleet.runner.llm.client import litellm

    for field, model, api_base, params in named:
        try:
            name, provider, _, _ = litellm.get_llm_provider(model=model.strip(), api_base=api_base)
        except Exception as exc:  # noqa: BLE001 - LiteLLM's error says which providers it knows
            cause = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            problems.append(
                f"{field}.model: '{model[:80]}' names no provider LiteLLM knows; write it as <provider>/<model> "
                f"(e.g. openai/gpt-5, anthropic/claude-sonnet-4-5, gemini/gemini-2.5-pro) ({cause})"
            )
            continue
        supported = litellm.get_supported_openai_params
        problems += _unsupported_params(f"{field}.params", model, name, provider, params, supported)
    return problems


def _unsupported_params(
    field: str,
    model: str,
    name: str,
    provider: str,
    params: dict[str, Any],
    supported_params: Callable[..., list[str] | None],
) -> list[str]:
    """Parameters LiteLLM knows the model does not take. It drops them without a word (``drop_params``), where
    MCPMark's run would fail on them, and the run would still be labelled with them (``reasoningEffort: high``
    on gpt-4.1 exported as ``gpt-4.1-high``). A model LiteLLM has no list for passes. ``supported_params`` is
    LiteLLM's ``get_supported_openai_params``, handed in so that LiteLLM is imported in one place only."""
    if not params:
        return []
    try:
        supported = supported_params(model=name, custom_llm_provider=provider)
    except Exception:  # noqa: BLE001 - no list, no verdict
        return []
    if not supported:
        return []
    return [
        f"{field}.{to_camel(key)}: LiteLLM lists no '{key}' among the parameters '{model}' takes, so it would be "
        "dropped from every call while the run is labelled with it; remove it (or name a model that takes it)"
        for key in params
        if key not in supported
    ]


def _scripted(run: EvalRun) -> Iterator[tuple[int, Options | ModelError]]:
    """Each scripted model's index and its options as the scripted model server parses them, or its error."""
    from mcpfleet.runner.launch.scripted_options import ModelError, parse_model

    for i, m in enumerate(run.spec.models):
        if m.is_scripted:
            try:
                yield i, parse_model(m.model.removeprefix("scripted/"), 0.0)
            except ModelError as exc:
                yield i, exc


def scripted_problems(run: EvalRun, base_dir: Path | None = None) -> list[str]:
    """Scripted model strings the scripted model server would refuse (an unknown policy or option): every
    trial's first call would fail, and the model be scored 0 on a typo. With ``base_dir`` (the EvalRun file's
    folder, where this machine runs the scripted server), also a ``script=<file>`` it could not play: missing,
    not JSON, no ``turns``; read as the server reads it (a relative path from ``base_dir``, as ``mcpfleet run``
    tells its server). The operator passes none: its scripted server's files are not on its machine."""
    from mcpfleet.runner.launch.scripted_options import ModelError, ScriptError, load_script, script_path

    problems = []
    for i, got in _scripted(run):
        if isinstance(got, ModelError):
            problems.append(f"spec.models[{i}].model: {got.message}")
        elif got.policy == "script" and got.arg and base_dir is not None:
            try:
                load_script(script_path(got.arg, base_dir))
            except ScriptError as exc:
                relative = not Path(got.arg).expanduser().is_absolute()
                where = f" (a relative path is read from the EvalRun file's folder, {base_dir})" if relative else ""
                problems.append(f"spec.models[{i}].model: {exc}{where}")
    return problems


def scripted_oracle_problems(run: EvalRun, tasks: list[Task]) -> list[str]:
    """Selected tasks the scripted oracle model cannot tell apart: it knows a task by its description only,
    so a description other tasks of the served packs share (with another oracle) replayed the first found,
    even an unselected task's, and scored the oracle 0 without a word. The server refuses those calls too."""
    from mcpfleet.runner.launch.scripted_options import ModelError
    from mcpfleet.runner.launch.scripted_policies import ambiguous_message, shared_descriptions
    from mcpfleet.runner.spec.task import TaskError
    from mcpfleet.runner.tasks.discovery import discover

    if not any(not isinstance(got, ModelError) and got.policy == "oracle" for _, got in _scripted(run)):
        return []

    def readable(root: Path) -> Iterator[Task]:
        for task in discover(root):
            try:
                task.description  # noqa: B018 - read (and cached) here: an unselected task's bad file is not ours
            except TaskError:
                continue
            yield task

    roots = sorted({t.pack_root for t in tasks})  # the packs the scripted server indexes (the trials' roots)
    shared = shared_descriptions(t for root in roots for t in readable(root))
    if not shared:
        return []
    problems = [ambiguous_message(ids, task.id) for task in tasks if (ids := shared.get(task.description.strip()))]
    return [f"spec.models: {p}" for p in problems[:10]] + (
        [f"spec.models: ... and {len(problems) - 10} more"] if len(problems) > 10 else []
    )


def replays_oracle(run: EvalRun) -> bool:
    """Whether the run's trials replay oracle.json: the oracle agent, or the scripted oracle model."""
    from mcpfleet.runner.launch.scripted_options import ModelError

    return run.spec.agent == AgentKind.oracle or any(
        not isinstance(got, ModelError) and got.policy == "oracle" for _, got in _scripted(run)
    )


def oracle_problems(run: EvalRun, tasks: list[Task]) -> list[str]:
    """A run that replays oracles (the oracle agent, the scripted oracle model) over tasks whose oracle.json is
    missing or broken: each of those trials would fail, and the pack's fault would read as a failed task."""
    if not replays_oracle(run):
        return []
    from mcpfleet.runner.services import SERVICES

    problems = []
    for task in tasks:
        service = SERVICES.get(task.service)
        if service is not None and service.oracle_json and (problem := task.oracle_problem()):
            problems.append(problem)
    if not problems:
        return []
    more = [f"... and {len(problems) - 10} more"] if len(problems) > 10 else []
    lacking = plural(len(problems), "selected task has", "selected tasks have")
    head = (
        f"spec: the run replays oracle solutions, and {lacking} none that can be replayed; fix oracle.json (check "
        "with: mcpfleet tasks validate <pack>), or narrow the selection"
    )
    return ["\n  ".join([head, *problems[:10], *more])]


def state_problems(tasks: list[Task]) -> list[str]:
    """Selected tasks whose initial state is missing (a wrong ``tasks.statesPath``, a pack without its
    states): each of their trials would fail, be retried and end as an unscored infra_error, so the run
    would measure nothing of them after minutes of work. Each service says what its state is."""
    from mcpfleet.runner.services import SERVICES

    problems = []
    for task in tasks:
        service = SERVICES.get(task.service)
        problems += service.check_state(task) if service is not None else []
    if not problems:
        return []
    more = [f"... and {len(problems) - 10} more"] if len(problems) > 10 else []
    lacking = plural(len(problems), "selected task has", "selected tasks have")
    head = f"spec.tasks: {lacking} no initial state; set tasks.statesPath to the folder"
    fix = " holding them (or replace a broken state file named below), or narrow the selection"
    if not all("not found" in p for p in problems):  # a state that is there but cannot be used (a device, a link out)
        head = f"spec.tasks: {lacking} an initial state that cannot be used"
        fix = "; fix each state as named below (nothing was run), or narrow the selection"
    return ["\n  ".join([head + fix, *problems[:10], *more])]


def image_problems(run: EvalRun, tasks: list[Task]) -> list[str]:
    """spec.pod.sidecarImages keys no pod would use: a typo (``filesytem``) would otherwise run every trial on
    the default image, silently. A key may name any service this build knows (a spec written for several
    suites), an image such a service's pods need besides its server's (``postgres-db``), or a service of a
    selected task (a service this build does not know: its image serves ``mcp-server-<service>``). Checked
    locally too, where pods are not used: ``validate`` must not call valid a spec the operator refuses."""
    from mcpfleet.runner.services import SERVICES

    known = {*SERVICES, *(t.service for t in tasks), *(key for s in SERVICES.values() for key in s.pod_images)}
    return [
        f"spec.pod.sidecarImages.{key}: no service or pod image is named '{key}' (known: {', '.join(sorted(known))}); "
        "correct the key or remove it"
        for key in sorted(run.spec.pod.sidecar_images)
        if key not in known
    ]


def server_problems(run: EvalRun, base_dir: Path, tasks: list[Task]) -> list[str]:
    """Servers this machine cannot start for the selected tasks, each server variant's too (a declared command
    that is not installed): every trial of them would end as an infrastructure error."""
    from mcpfleet.runner.plan.expand import variants_of, with_variant_paths
    from mcpfleet.runner.services import service_of

    resolved = with_variant_paths(run, base_dir)
    problems: list[str] = []
    for task in {t.service: t for t in tasks}.values():
        for variant in variants_of(resolved, task):
            try:
                service = service_of(task.service, task.pack_root, variant)
            except ValueError:
                continue  # a service no build knows: refused by the task checks
            problems += [p for p in service.launch_problems() if p not in problems]
        problems += service_of(task.service, task.pack_root).task_problems(
            [t for t in tasks if t.service == task.service]
        )
    return problems


def selection(run: EvalRun, base_dir: Path, *, states: bool = True) -> list[Task]:
    """The run's selected tasks; SpecError for those whose trials could only fail: with ``states``, a missing or
    unusable initial state (where this machine holds the states: not the operator, whose pods bring them), and,
    in a run that replays oracles, an oracle.json that cannot be replayed (and, for the scripted oracle, a
    description tasks with other oracles share); and sidecarImages keys that name nothing. Every path that
    plans a run (the local preflight, the operator) plans from this."""
    from mcpfleet.runner.tasks.discovery import load_selection

    tasks = load_selection(run.spec.tasks, base_dir)
    problems = state_problems(tasks) + server_problems(run, base_dir, tasks) if states else []
    problems += oracle_problems(run, tasks) + scripted_oracle_problems(run, tasks) + image_problems(run, tasks)
    if problems:
        raise SpecError(problems)
    return tasks


def preflight(run: EvalRun, base_dir: Path, env: Mapping[str, str], *, local: bool = True) -> list[Task]:
    """Raise SpecError naming every field this machine cannot honour; else the selected tasks (for ``plan``:
    the pack is read, and its tasks hashed, once)."""
    problems = credential_problems(run, env, local=local) + model_problems(run, base_dir) + budget_problems(run)
    if bad := output_problem(run.spec.output.uri, base_dir):
        problems.append(bad)
    if problems:  # (the pack is read only for a spec that is otherwise fine)
        raise SpecError(problems)
    tasks = selection(run, base_dir)
    if bad := run_folder_problem(run, base_dir, tasks):
        raise SpecError([bad])
    return tasks


def run_folder_problem(run: EvalRun, base_dir: Path, tasks: list[Task]) -> str | None:
    """Why the run's local folder (``<output.uri>/<name>``) cannot be where it is. No folder (a file or a dangling
    link in its place): the run's first write fails. Inside another run's folder:
    that run's resume removes every folder under its ``trials/`` without a record, this whole run with them.
    Inside a task pack or states folder (or holding one): the records land in what every later trial copies as
    its initial state, earlier trials' transcripts included, and the task's content changes under the run."""
    uri = run.spec.output.uri
    if uri.startswith("s3://"):
        return None
    root = Path(uri).expanduser()
    given = Path(os.path.normpath((root if root.is_absolute() else base_dir / root) / run.name))
    if os.path.lexists(given) and not given.is_dir():  # (the run's first mkdir would be a traceback)
        what = "a symbolic link to no folder" if given.is_symlink() else "not a folder"
        return (
            f"spec.output.uri: the run folder {given} (output.uri/metadata.name) is {what}; remove or move it, or "
            "give the run another metadata.name or output.uri"
        )
    folder = resolved(given)
    for parent in folder.parents:
        if (parent / "run.json").is_file() and (parent / "trials").is_dir():
            return (
                f"spec.output.uri: the run folder {folder} would lie inside the run folder {parent}, whose resume "
                "removes what it finds there; give an output folder outside any run's folder"
            )
    packs = {t.pack_root for t in tasks} | {t.states_path for t in tasks if t.states_path is not None}
    for pack in sorted(resolved(Path(p)) for p in packs):
        if overlap(folder, pack):
            return (
                f"spec.output.uri: the run folder {folder} and the task pack or states folder {pack} overlap: "
                "records would be written into what every trial copies; give an output folder outside both"
            )
    return None
