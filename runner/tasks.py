"""Task packs in MCPMark's layout: ``<root>/<service>/<difficulty>/<category>/<task>/``.

A task folder holds ``description.md`` (the instruction), ``verify.py`` (exit 0 = pass) and
``meta.json``; mcpfleet adds an optional ``oracle.json`` (a fixed list of MCP tool calls) and
bundled initial states under ``<root>/<service>/states/<category>/``. Foreign packs (MCPMark's own)
load unchanged; their states come from ``tasks.statesPath``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .spec import TaskSelection

REQUIRED_FILES = ("description.md", "verify.py", "meta.json")
META_FIELDS = (
    "task_id",
    "task_name",
    "category_id",
    "category_name",
    "description",
    "author",
    "created_at",
    "difficulty",
    "tags",
    "mcp",
    "meta_data",
)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
ROOT_TOKEN = "{root}"
NON_TASK_DIRS = {"states", "__pycache__"}


class TaskError(ValueError):
    """A task folder that cannot be used, naming the file and the fix."""


@dataclass(frozen=True)
class OracleStep:
    tool: str
    arguments: dict[str, Any]

    def resolve(self, root: str) -> dict[str, Any]:
        return _substitute(self.arguments, root)


def _substitute(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return value.replace(ROOT_TOKEN, root)
    if isinstance(value, list):
        return [_substitute(v, root) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, root) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Task:
    """One task folder. ``id`` is ``<service>/<difficulty>/<category>/<name>``."""

    service: str
    difficulty: str
    category: str
    name: str
    path: Path
    states_root: Path = field(compare=False)

    @property
    def id(self) -> str:
        return f"{self.service}/{self.difficulty}/{self.category}/{self.name}"

    @cached_property
    def description(self) -> str:
        return (self.path / "description.md").read_text(encoding="utf-8")

    @cached_property
    def meta(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / "meta.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TaskError(f"{self.path / 'meta.json'}: not valid JSON: {exc}") from None

    @property
    def verifier(self) -> Path:
        return self.path / "verify.py"

    @property
    def state_dir(self) -> Path:
        """Initial state folder for this task's category (may not exist for a foreign pack)."""
        return self.states_root / self.category

    @property
    def state_times(self) -> Path:
        return self.states_root / f"{self.category}.times.json"

    @property
    def has_oracle(self) -> bool:
        return (self.path / "oracle.json").is_file()

    @cached_property
    def oracle(self) -> list[OracleStep]:
        path = self.path / "oracle.json"
        if not path.is_file():
            raise TaskError(f"{self.id}: no oracle.json; the oracle agent needs one")
        data = json.loads(path.read_text(encoding="utf-8"))
        steps = data.get("steps") if isinstance(data, dict) else None
        if not isinstance(steps, list) or not steps:
            raise TaskError(f'{path}: expected {{"steps": [{{"tool": ..., "arguments": {{...}}}}, ...]}}')
        out = []
        for i, s in enumerate(steps):
            if (
                not isinstance(s, dict)
                or not isinstance(s.get("tool"), str)
                or not isinstance(s.get("arguments", {}), dict)
            ):
                raise TaskError(f"{path}: steps[{i}] needs a 'tool' string and an 'arguments' object")
            out.append(OracleStep(s["tool"], s.get("arguments", {})))
        return out

    @cached_property
    def oracle_answer(self) -> str | None:
        """The final answer an answer task's oracle gives (oracle.json "answer"), read by the verifier."""
        path = self.path / "oracle.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except json.JSONDecodeError:
            return None
        answer = data.get("answer") if isinstance(data, dict) else None
        return answer if isinstance(answer, str) else None

    @cached_property
    def digest(self) -> str:
        """Content hash of the task folder and its initial state: a changed verifier is a changed trial."""
        from .services import SERVICES

        h = hashlib.sha256()
        service = SERVICES.get(self.service)
        for base in [self.path, *(service.state_files(self) if service else [])]:
            if base.is_dir():
                for f in sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
                    h.update(str(f.relative_to(base)).encode())
                    h.update(f.read_bytes())
            elif base.is_file():
                h.update(base.read_bytes())
        return h.hexdigest()[:16]


def discover(root: Path, states_path: Path | None = None) -> list[Task]:
    """All task folders under a pack root, sorted by id; a folder is a task if it has description.md."""
    root = Path(root)
    if not root.is_dir():
        raise TaskError(f"task pack {root} does not exist; set spec.tasks.path to a folder in MCPMark layout")
    tasks = []
    for desc in sorted(root.glob("*/*/*/*/description.md")):
        task_dir = desc.parent
        service, difficulty, category, name = task_dir.relative_to(root).parts
        if service in NON_TASK_DIRS or difficulty in NON_TASK_DIRS:
            continue
        states_root = (Path(states_path) / service) if states_path else root / service / "states"
        tasks.append(Task(service, difficulty, category, name, task_dir, states_root))
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
    return Path(env) if env else Path(__file__).resolve().parents[1]


def resolve_pack(sel: TaskSelection, base_dir: Path) -> tuple[Path, Path | None]:
    """Resolve the pack and states paths of a selection: relative to the EvalRun file's folder, falling
    back to mcpfleet's bundled packs (so the default ``tasks`` works from any folder and in the cluster).
    An s3:// pack (or states location) is mirrored into the local cache first (see ``packs``)."""
    from . import packs

    def mirrored(uri: str, field: str) -> Path:
        return packs.sync(
            uri, packs.mirror_path(uri, sel.endpoint_url), endpoint_url=sel.endpoint_url, region=sel.region, field=field
        )

    if sel.path.startswith("s3://"):
        root = mirrored(sel.path, "spec.tasks.path")
    else:
        root = Path(sel.path)
        if not root.is_absolute():
            candidate = (base_dir / root).resolve()
            root = candidate if candidate.exists() else (bundled_root() / root).resolve()
    states = None
    if sel.states_path and sel.states_path.startswith("s3://"):
        states = mirrored(sel.states_path, "spec.tasks.statesPath")
    elif sel.states_path:
        states = Path(sel.states_path)
        if not states.is_absolute():
            states = (base_dir / states).resolve()
    return root, states


def load_selection(sel: TaskSelection, base_dir: Path) -> list[Task]:
    root, states = resolve_pack(sel, base_dir)
    chosen = select(discover(root, states), sel)
    if not chosen:
        raise TaskError(
            f"spec.tasks: the filters select no task under {root}; "
            "check services/difficulties/categories/include/exclude"
        )
    return chosen


def find_task(root: Path, task_id: str, states_path: Path | None = None) -> Task:
    parts = task_id.split("/")
    if len(parts) != 4:
        raise TaskError(f"task id '{task_id}' must be <service>/<difficulty>/<category>/<task>")
    path = Path(root, *parts)
    if not (path / "description.md").is_file():
        raise TaskError(f"task '{task_id}' not found under {root}")
    states_root = (Path(states_path) / parts[0]) if states_path else Path(root) / parts[0] / "states"
    return Task(*parts, path=path, states_root=states_root)


def check_task(task: Task) -> list[str]:
    """Static checks of one task folder: files, names and meta.json fields. Returns problems."""
    problems = []
    for f in REQUIRED_FILES:
        if not (task.path / f).is_file():
            problems.append(f"{task.id}: missing {f}")
    for part in (task.service, task.difficulty, task.category, task.name):
        if not NAME_RE.match(part):
            problems.append(f"{task.id}: '{part}' must match {NAME_RE.pattern} (it becomes part of trial ids)")
    if problems:
        return problems
    try:
        meta = task.meta
    except TaskError as exc:
        return [str(exc)]
    missing = [k for k in META_FIELDS if k not in meta]
    if missing:
        problems.append(f"{task.id}: meta.json lacks {', '.join(missing)}")
    if meta.get("task_id") not in (None, task.name):
        problems.append(f"{task.id}: meta.json task_id '{meta.get('task_id')}' differs from folder '{task.name}'")
    if meta.get("category_id") not in (None, task.category):
        problems.append(
            f"{task.id}: meta.json category_id '{meta.get('category_id')}' differs from folder '{task.category}'"
        )
    if "mcp" in meta and task.service not in (meta.get("mcp") or []):
        problems.append(f"{task.id}: meta.json mcp {meta.get('mcp')} does not list '{task.service}'")
    if not task.description.strip():
        problems.append(f"{task.id}: description.md is empty")
    from .services import SERVICES

    service = SERVICES.get(task.service)
    if service is None:
        problems.append(f"{task.id}: service '{task.service}' is not supported; known: {', '.join(sorted(SERVICES))}")
    else:
        problems.extend(service.check_state(task))
    if task.has_oracle:
        try:
            _ = task.oracle  # parses oracle.json: a broken one is a problem to report
        except (TaskError, json.JSONDecodeError) as exc:
            problems.append(str(exc))
    return problems
