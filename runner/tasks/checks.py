"""Checks of task folders before any trial runs: files, names, links, meta.json, description.md and verify.py."""

from __future__ import annotations

import ast
import json
import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.services import SERVICES
from mcpfleet.runner.spec.task import (
    MAX_NAME_LENGTH,
    MAX_TASK_BYTES,
    MAX_TASK_ENTRIES,
    MAX_TASK_ID_LENGTH,
    MAX_VERIFY_BYTES,
    META_FIELDS,
    NAME_RE,
    NON_TASK_DIRS,
    REQUIRED_FILES,
    PackCheckError,
    Task,
    TaskError,
    json_kind,
    read_bytes,
)

if TYPE_CHECKING:
    from mcpfleet.runner.services.base import Service


def check_selected(tasks: list[Task]) -> None:
    """Refuse the run when a selected task cannot run at all: a missing file, a misnamed folder, a link out of the
    pack, a meta.json that is not a JSON object or names the task with a non-string id, a blank description, a
    verify.py Python cannot compile or that holds no statement (it would pass every trial), or a "mcpfleet" key
    its service does not know. (The full checks, oracle included, are ``mcpfleet tasks validate``'s.)"""

    problems = []
    for task in tasks:
        found = check_task_files(task)
        for name in ("meta.json", "description.md"):
            if found:
                break
            try:
                _ = task.meta if name == "meta.json" else task.description
            except TaskError as exc:
                found.append(str(exc))
            except OSError as exc:
                found.append(f"{task.id}: {name} unreadable: {exc}")
        if not found:
            found += content_problems(task)
        if not found and (problem := _folder_too_large(task)):  # (after the files' own, more precise, limits)
            found.append(problem)
        if not found and (service := SERVICES.get(task.service)) is not None:
            found += service.meta_problems(task)
        problems += found
    if problems:
        head = f"task pack: {plural(len(problems), 'problem')} in the selected tasks; nothing was run"
        more = [f"... and {len(problems) - 10} more"] if len(problems) > 10 else []
        raise PackCheckError("\n  ".join([head, *problems[:10], *more, "check with: mcpfleet tasks validate <pack>"]))


def name_problems(service: str, difficulty: str, category: str, name: str) -> list[str]:
    """Why a task's folder names cannot be used: each becomes part of trial ids (file names), and ``discover``
    skips a service or difficulty folder named like a non-task folder. One rule for a pack's folders
    (``check_task_files``) and for the folders ``mcpfleet toolcalls task`` writes (``toolcalls.pack.make_task``)."""
    task_id = f"{service}/{difficulty}/{category}/{name}"
    problems = []
    for part in (service, difficulty, category, name):
        if not NAME_RE.fullmatch(part):
            problems.append(f"{task_id}: {part!r} must match {NAME_RE.pattern} (it becomes part of trial ids)")
        elif len(part) > MAX_NAME_LENGTH:
            problems.append(
                f"{task_id}: folder name '{part[:20]}...' has {len(part)} characters; rename it to at most "
                f"{MAX_NAME_LENGTH} (it becomes part of trial ids, which are file names)"
            )
    for level, part in (("service", service), ("difficulty", difficulty)):
        if not problems and part in NON_TASK_DIRS:
            problems.append(
                f"{task_id}: a {level} folder named '{part}' holds initial states or caches, not tasks, so no run "
                f"would find the task; choose another {level} name"
            )
    if not problems and len(task_id) > MAX_TASK_ID_LENGTH:
        problems.append(
            f"{task_id}: the task id has {len(task_id)} characters; shorten the category or task folder name so it "
            f"has at most {MAX_TASK_ID_LENGTH} (it becomes part of trial ids, which are file names)"
        )
    return problems


def check_task_files(task: Task) -> list[str]:
    """The task's required files (its service's), folder names (each name becomes part of trial ids) and links
    (none may lead out of the pack: see ``_walk_task_folder``)."""

    problems = name_problems(task.service, task.difficulty, task.category, task.name)
    if problem := outside_pack(task.path, task.pack_root, task.id):
        return [*problems, problem]
    known = SERVICES.get(task.service)
    files = known.required_files if known is not None else REQUIRED_FILES
    for f in dict.fromkeys([*files, "oracle.json", "mutants.json"]):
        path = task.path / f
        if f in files and not path.is_file():
            problems.append(f"{task.id}: missing {f}" + (" (it is not a regular file)" if path.exists() else ""))
        elif (path.exists() or path.is_symlink()) and (problem := outside_pack(path, task.pack_root, task.id)):
            problems.append(problem)
    problems += _walk_task_folder(task)[0]
    return list(dict.fromkeys(problems))  # a named file's link out of the pack is found by both checks


def _walk_task_folder(task: Task) -> tuple[list[str], int, int]:
    """Walk the task folder as a copy of it would (``shutil.copytree``, ``cp -rL``, ``aws s3 sync``: links
    followed) and return (problems with its links, apparent bytes, entries). A link resolving outside the pack
    (the digest would hash, and the verifier's folder hold, a host file) and a folder link to its own ancestor (a
    copy would never end) are problems, as in an initial state (``states.check_copyable``); a dangling link
    copies nothing. Stops once past MAX_TASK_BYTES or MAX_TASK_ENTRIES (``_folder_too_large`` says so)."""
    from mcpfleet.runner.environment.states import contained

    problems: list[str] = []
    size = entries = 0

    def walk(folder: Path, real: Path, ancestors: tuple[Path, ...]) -> None:
        nonlocal size, entries
        try:
            with os.scandir(folder) as found:
                children = sorted(found, key=lambda e: e.name)
        except OSError:  # unlistable: nothing a copy or the digest could read either
            return
        for entry in children:
            if size > MAX_TASK_BYTES or entries > MAX_TASK_ENTRIES:
                return
            entries += 1
            path, link = Path(entry.path), entry.is_symlink()
            if link:
                try:
                    contained(path, task.pack_root, f"{task.id}:", "the pack ")
                except TaskError as exc:
                    problems.append(str(exc))
                    continue
            try:
                st = path.stat()
            except OSError:  # a dangling link
                continue
            if stat.S_ISDIR(st.st_mode):
                target = path.resolve() if link else real / entry.name
                if any(a.is_relative_to(target) for a in ancestors):  # `up -> ..` too: it holds the task folder
                    problems.append(
                        f"{task.id}: {path}: folder link to {target}, which holds the link itself (a loop: a copy "
                        "of the task folder would never end); remove it"
                    )
                    continue
                walk(path, target, (*ancestors, target))
            elif stat.S_ISREG(st.st_mode):
                size += st.st_size

    real = task.path.resolve()
    walk(task.path, real, (real,))
    return problems, size, entries


def _folder_too_large(task: Task) -> str | None:
    """A task folder over MAX_TASK_BYTES (apparent size: a sparse file counts whole, as its digest reads it
    whole; a link counts as its target, as a copy of the folder holds it) or MAX_TASK_ENTRIES: task folders hold
    words and scripts; bulk data belongs in the initial state."""
    _, size, entries = _walk_task_folder(task)
    if size > MAX_TASK_BYTES or entries > MAX_TASK_ENTRIES:
        return (
            f"{task.id}: the task folder holds more than {MAX_TASK_BYTES // 1024**2} MiB or "
            f"{MAX_TASK_ENTRIES:,} files (apparent sizes, links counted as their targets; every trial hashes it); "
            "move bulk data into the task's initial state"
        )
    return None


def _meta_id_problems(task: Task) -> list[str]:
    """meta.json's ``task_id``/``category_id``, when given, must be non-empty strings: MCPMark names the task
    ``<category_id>__<task_id>`` from them (its records, ``export --format mcpmark``), and a null or a number
    would name it ``None__None`` or ``None__5``. (MCPMark's own meta.json files always hold strings.)"""
    problems = []
    for key, folder in (("category_id", task.category), ("task_id", task.name)):
        if key not in task.meta:
            continue
        value = task.meta[key]
        if not isinstance(value, str) or not value.strip():
            kind = "a blank string" if isinstance(value, str) else json_kind(value)
            problems.append(
                f'{task.id}: meta.json "{key}" must be a non-empty string (MCPMark names the task '
                f'<category_id>__<task_id>), not {kind}; write "{folder}" (the folder\'s name) or remove the key'
            )
    return problems


def _verify_problem(task: Task) -> str | None:
    """Why verify.py cannot be a verifier: Python cannot compile it (every trial would be a ``verifier_failed``
    scored against the model), or it holds no statement that runs (only blank lines, comments, a docstring or
    ``pass``: it exits 0 and every trial would pass). Compiled, not run, by the Python that runs verifiers."""
    path = task.verifier
    source = read_bytes(path, MAX_VERIFY_BYTES)
    try:
        with warnings.catch_warnings():  # a SyntaxWarning (an invalid escape) is the verifier's to print
            warnings.simplefilter("ignore")
            code = compile(source, str(path), "exec", dont_inherit=True)  # the runner's own __future__ flags left out
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        return (
            f"{path}: {where}{exc.msg}; Python cannot run it, so every trial would fail as verifier_failed against "
            f"the model; fix it (python -m py_compile {path.name} shows the error)"
        )
    except (RecursionError, MemoryError):  # nested past what the parser or compiler can hold
        return f"{path}: nested too deeply for Python to compile; simplify it"
    if set(code.co_names) - {"__doc__"}:  # it names something, so some statement runs (the AST is not needed)
        return None
    inert = (ast.Pass, ast.Expr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(source, str(path))
    if all(isinstance(s, inert) and (isinstance(s, ast.Pass) or isinstance(s.value, ast.Constant)) for s in tree.body):
        return (
            f"{path}: holds no statement that runs (only blank lines, comments, a docstring or pass), so it would "
            "exit 0 and pass every trial; write the checks of the task's end state"
        )
    return None


def content_problems(task: Task) -> list[str]:
    """What ``check_selected`` and ``check_task`` both refuse inside a task's files once they can be read: ids in
    meta.json that are not strings, a blank description.md, a verify.py that cannot be a verifier."""

    problems = _meta_id_problems(task)
    if not task.description.strip():
        problems.append(f"{task.id}: description.md is empty (or only whitespace); write the task's instruction")
    known = SERVICES.get(task.service)
    if "verify.py" in (known.required_files if known is not None else REQUIRED_FILES):
        try:
            if problem := _verify_problem(task):
                problems.append(problem)
        except TaskError as exc:
            problems.append(str(exc))
        except OSError as exc:
            problems.append(f"{task.id}: verify.py unreadable: {exc}")
    return problems


def _plan_problems(service: Service, task: Task) -> list[str]:
    """What planning the task would refuse (a toolcall task whose data holds no case): ``tasks validate`` says it
    as ``validate`` and ``run`` do, rather than calling the task valid."""
    from mcpfleet.runner.spec.evalrun import EvalRunSpec, ModelSpec

    try:
        service.shards(task, EvalRunSpec(models=[ModelSpec(name="check", model="scripted/noop")]))
    except TaskError as exc:
        return [str(exc)]
    return []


@dataclass(frozen=True)
class TaskCheck:
    problems: list[str]
    state_missing: bool = False  # the service found the task's initial state missing or unusable


def check_task(task: Task) -> list[str]:
    """Static checks of one task folder: files, names, links, meta.json fields, description.md and verify.py.
    Returns problems."""
    return inspect_task(task).problems


def _state_missing(task: Task) -> bool:
    """Whether the service finds the task's initial state missing, for a task whose other checks stopped early."""

    service = SERVICES.get(task.service)
    try:
        return service is not None and bool(service.check_state(task))
    except (TaskError, OSError):
        return False


def inspect_task(task: Task) -> TaskCheck:
    """``check_task``, also saying whether the problems include the task's missing state (``tasks validate``'s
    hint about ``--states`` reads it rather than checking every state again)."""

    problems = check_task_files(task)
    if problems:
        return TaskCheck(problems, _state_missing(task))
    try:
        meta, _ = task.meta, task.description
    except TaskError as exc:
        return TaskCheck([str(exc)], _state_missing(task))
    except OSError as exc:
        return TaskCheck([f"{task.id}: unreadable: {exc}"], _state_missing(task))
    if problem := _folder_too_large(task):
        return TaskCheck([problem], _state_missing(task))
    problems += content_problems(task)
    missing = [k for k in META_FIELDS if k not in meta]
    if missing:
        problems.append(f"{task.id}: meta.json lacks {', '.join(missing)}")
    for key, folder in (("task_id", task.name), ("category_id", task.category)):
        if isinstance(value := meta.get(key), str) and value.strip() and value != folder:
            problems.append(f"{task.id}: meta.json {key} '{value}' differs from folder '{folder}'")
    mcp = meta.get("mcp") or []
    if "mcp" in meta and not isinstance(mcp, list):
        problems.append(
            f'{task.id}: meta.json mcp must be a list of services (MCPMark\'s form), e.g. ["{task.service}"]; '
            f"got {json.dumps(meta.get('mcp'))}"
        )
    elif "mcp" in meta and task.service not in mcp:
        problems.append(f"{task.id}: meta.json mcp {json.dumps(mcp)} does not list '{task.service}'")
    service = SERVICES.get(task.service)
    state: list[str] = []
    if service is None:
        problems.append(f"{task.id}: service '{task.service}' is not supported; known: {', '.join(sorted(SERVICES))}")
    else:
        problems.extend(service.meta_problems(task))
        state = service.check_state(task)
        problems.extend(state or _plan_problems(service, task))
    if task.has_oracle and (problem := task.oracle_problem()):
        problems.append(problem)
    if task.has_mutants:
        try:
            mutants = task.mutants
        except TaskError as exc:
            problems.append(str(exc))
        else:
            if any(m.after_oracle for m in mutants) and not task.has_oracle:
                problems.append(f"{task.id}: a mutant replays the oracle (after_oracle) but there is no oracle.json")
    return TaskCheck(problems, state_missing=bool(state))


def outside_pack(path: Path, root: Path, task_id: str) -> str | None:
    """Why ``path`` (a task folder or file) is not usable: it resolves outside the pack (``states.contained``)."""
    from mcpfleet.runner.environment.states import contained

    try:
        contained(path, root, f"{task_id}:", "the pack ")
    except TaskError as exc:
        return str(exc)
    return None
