"""Task packs in MCPMark's layout: ``<root>/<service>/<difficulty>/<category>/<task>/``.

A task folder holds ``description.md`` (the instruction), ``verify.py`` (exit 0 = pass) and
``meta.json``; mcpfleet adds an optional ``oracle.json`` (a fixed list of MCP tool calls), an optional
``mutants.json`` (plausible wrong end states the verifier must reject) and bundled initial states under
``<root>/<service>/states/<category>/``. Foreign packs (MCPMark's own) load unchanged; their states come
from ``tasks.statesPath``, in mcpfleet's layout (``<statesPath>/<service>/<category>/``) or MCPMark's
(``<statesPath>/<category>/``, as its filesystem service keeps ``test_environments/<category>/``).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.runner._util.plural import plural
from mcpfleet.runner.services import SERVICES, register_pack
from mcpfleet.runner.spec.evalrun import TaskSelection
from mcpfleet.runner.spec.task import NON_TASK_DIRS, Task, TaskError, state_folders
from mcpfleet.runner.tasks.checks import check_selected, outside_pack

if TYPE_CHECKING:
    pass


def locate_state(pack_root: Path, states_path: Path | None, service: str, category: str) -> Path:
    """Where ``category``'s initial state folder is: the first candidate folder holding it (the first one when
    none does, so a missing state is reported at mcpfleet's own layout). Services whose states are files
    (``<category>.sql``) look in :attr:`Task.states_folder` and the same candidates."""
    name = category
    known = SERVICES.get(service)
    folders = state_folders(pack_root, states_path, service, known.mcpmark_states if known else None)
    return next((f / name for f in folders if (f / name).exists()), folders[0] / name)


def discover(root: Path, states_path: Path | None = None, overrides: Iterable[str] | None = None) -> list[Task]:
    """All task folders under a pack root, sorted by id; a folder is a task if it has description.md. The pack's
    declared services (``<service>/service.yaml``) are registered first. ``overrides``: for an EvalRun's
    selection, the bundled services its declarations may replace (spec.tasks.overrideServices), any other clash
    refused; None (a pack read for itself or for a run already checked): every declaration taken."""
    root = Path(root)
    if root.is_file():
        raise TaskError(f"task pack {root} is a file; set spec.tasks.path to the pack's root folder (MCPMark layout)")
    if not root.is_dir():
        raise TaskError(f"task pack {root} does not exist; set spec.tasks.path to a folder in MCPMark layout")
    register_pack(root, overrides or (), trusted=overrides is None)
    tasks = []
    try:
        found = sorted(root.glob("*/*/*/*/description.md"))
    except OSError as exc:  # a folder that cannot be listed (`tasks.path: /` reaches /proc)
        raise TaskError(
            f"task pack {root}: cannot be read ({exc}); set spec.tasks.path to the pack's root folder (MCPMark layout)"
        ) from None
    for desc in found:
        task_dir = desc.parent
        service, difficulty, category, name = task_dir.relative_to(root).parts
        if service in NON_TASK_DIRS or difficulty in NON_TASK_DIRS:
            continue
        state = locate_state(root, states_path, service, category)
        tasks.append(Task(service, difficulty, category, name, task_dir, state, states_path))
    return tasks


def select(tasks: list[Task], sel: TaskSelection) -> list[Task]:
    """Apply the spec's filters; every filter narrows, empty ones select all."""

    def keep(t: Task) -> bool:
        if sel.services and t.service not in sel.services:
            return False
        if sel.difficulties and t.difficulty not in sel.difficulties:
            return False
        if sel.categories and t.category not in sel.categories:
            return False
        if sel.include and not any(fnmatch.fnmatchcase(t.id, p) for p in sel.include):
            return False
        return not any(fnmatch.fnmatchcase(t.id, p) for p in sel.exclude)

    return [t for t in tasks if keep(t)]


def bundled_root() -> Path:
    """The folder holding mcpfleet's bundled packs: ``tasks/`` lives there (the repo, or the image's app dir)."""
    env = os.environ.get("MCPFLEET_APP_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2]


def resolve_pack(sel: TaskSelection, base_dir: Path) -> tuple[Path, Path | None]:
    """Resolve the pack and states paths of a selection: relative to the EvalRun file's folder, falling
    back to mcpfleet's bundled packs (so the default ``tasks`` works from any folder and in the cluster).
    An s3:// pack (or states location) is mirrored into the local cache first (see ``packs``)."""
    from mcpfleet.runner.tasks import packs

    def mirrored(uri: str, field: str) -> Path:
        return packs.sync(
            uri, packs.mirror_path(uri, sel.endpoint_url), endpoint_url=sel.endpoint_url, region=sel.region, field=field
        )

    if sel.path.startswith("s3://"):
        root = mirrored(sel.path, "spec.tasks.path")
    else:
        root = Path(sel.path).expanduser()  # `~/packs` as in a shell
        if not root.is_absolute():
            candidate = (base_dir / root).resolve()
            bundled = (bundled_root() / root).resolve()
            root = candidate if candidate.exists() or not bundled.exists() else bundled
        resolved = root.resolve()
        shown = f"'{sel.path}'" + (f" (resolved: {resolved})" if str(resolved) != sel.path else "")
        if resolved.is_file():
            raise TaskError(f"spec.tasks.path: {shown} is a file; give the pack's root folder (MCPMark layout)")
        if not resolved.is_dir():
            raise TaskError(
                f"spec.tasks.path: {shown} does not exist; give a folder in MCPMark layout "
                "(<service>/<difficulty>/<category>/<task>/), relative to the EvalRun file's folder"
            )
    states = None
    if sel.states_path and sel.states_path.startswith("s3://"):
        states = mirrored(sel.states_path, "spec.tasks.statesPath")
    elif sel.states_path:
        states = Path(sel.states_path).expanduser()
        if not states.is_absolute():
            states = (base_dir / states).resolve()
    return root, states


def _why_empty(tasks: list[Task], sel: TaskSelection, root: Path) -> str:
    """Which filter, applied in order, left no task, and what there was to choose from at that point."""
    if not tasks:
        return (
            f"spec.tasks.path: no task under {root} (a task is <service>/<difficulty>/<category>/<task>/description.md)"
        )
    steps: list[tuple[str, list[str], Any, Any]] = [
        ("services", sel.services, lambda t: t.service in sel.services, lambda t: t.service),
        ("difficulties", sel.difficulties, lambda t: t.difficulty in sel.difficulties, lambda t: t.difficulty),
        ("categories", sel.categories, lambda t: t.category in sel.categories, lambda t: t.category),
        ("include", sel.include, lambda t: any(fnmatch.fnmatchcase(t.id, p) for p in sel.include), lambda t: t.id),
        (
            "exclude",
            sel.exclude,
            lambda t: not any(fnmatch.fnmatchcase(t.id, p) for p in sel.exclude),
            lambda t: t.id,
        ),
    ]
    left = tasks
    for name, given, keep, shown in steps:
        if not given:
            continue
        kept = [t for t in left if keep(t)]
        if not kept:
            there = sorted({shown(t) for t in left})
            listed = ", ".join(there[:20]) + (f", ... ({len(there)} in all)" if len(there) > 20 else "")
            verb = "removes every remaining task" if name == "exclude" else "matches none"
            return (
                f"spec.tasks.{name}: {given} {verb} of the {plural(len(left), 'task')} left under {root}; there are: "
                f"{listed}"
            )
        left = kept
    return f"spec.tasks: the filters select no task under {root}"  # pragma: no cover - select() would agree


def load_selection(sel: TaskSelection, base_dir: Path) -> list[Task]:
    root, states = resolve_pack(sel, base_dir)
    found = discover(root, states, list(sel.override_services))
    chosen = select(found, sel)
    if not chosen:
        raise TaskError(_why_empty(found, sel, root))
    check_selected(chosen)
    return chosen


def find_task(root: Path, task_id: str, states_path: Path | None = None) -> Task:
    parts = task_id.split("/")
    if len(parts) != 4:
        raise TaskError(f"task id '{task_id}' must be <service>/<difficulty>/<category>/<task>")
    if any(part in ("", ".", "..") for part in parts):
        raise TaskError(
            f"task id '{task_id}': an empty, '.' or '..' part would leave the pack; name the task's folders"
        )
    service, difficulty, category, name = parts
    path = Path(root, *parts)
    if not (path / "description.md").is_file():
        raise TaskError(f"task '{task_id}' not found under {root}")
    if problem := outside_pack(path, Path(root), task_id):
        raise TaskError(problem)
    register_pack(Path(root), trusted=True)
    return Task(
        service,
        difficulty,
        category,
        name,
        path=path,
        state_dir=locate_state(Path(root), states_path, service, category),
        states_path=states_path,
    )
