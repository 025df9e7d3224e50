"""Task packs in MCPMark's layout: ``<root>/<service>/<difficulty>/<category>/<task>/``.

A task folder holds ``description.md`` (the instruction), ``verify.py`` (exit 0 = pass) and
``meta.json``; mcpfleet adds an optional ``oracle.json`` (a fixed list of MCP tool calls), an optional
``mutants.json`` (plausible wrong end states the verifier must reject) and bundled initial states under
``<root>/<service>/states/<category>/``. Foreign packs (MCPMark's own) load unchanged; their states come
from ``tasks.statesPath``, in mcpfleet's layout (``<statesPath>/<service>/<category>/``) or MCPMark's
(``<statesPath>/<category>/``, as its filesystem service keeps ``test_environments/<category>/``).
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import os
import re
import stat
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.spec.evalrun import TaskSelection

if TYPE_CHECKING:
    from mcpfleet.runner.services.base import Service

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
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")  # used with fullmatch: "t1\n" must not pass
# Each name becomes part of a trial id (<model>.<service>.<difficulty>.<category>.<task>[-sNNNN].<attempt>), a folder
# name, which a file system caps at 255 bytes: with a 40-character model name these bounds leave room to spare.
MAX_NAME_LENGTH = 64
MAX_TASK_ID_LENGTH = 160
# A task's text files are read whole, per trial and by the scripted model: a description is sent to the model
# with every call (256 KiB is ~64k tokens, past most context windows after a few turns; MCPMark's average is
# ~2 KB), and a JSON file of an oracle or mutants larger than 16 MiB is a mistake, not a task.
MAX_DESCRIPTION_BYTES = 256 * 1024
MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_VERIFY_BYTES = 16 * 1024 * 1024  # a verifier is a script: its reference data belongs beside it, not in it
MAX_TASK_BYTES = 256 * 1024**2  # a whole task folder (its verifier's reference data included)
MAX_TASK_ENTRIES = 10_000
ROOT_TOKEN = "{root}"
MUTANT_KEYS = {"name", "why", "after_oracle", "steps", "answer"}
NON_TASK_DIRS = {"states", "__pycache__"}


class TaskError(ValueError):
    """A task folder that cannot be used, naming the file and the fix."""


class PackCheckError(TaskError):
    """Selected tasks that cannot be run at all (a missing verify.py, a broken meta.json): refused before any
    trial, so a broken pack is never counted against a model as a failed verifier."""


def state_folders(pack_root: Path, states_path: Path | None, service: str) -> list[Path]:
    """Folders that may hold a service's states, in order of preference: the pack's bundled
    ``<service>/states`` without a statesPath; else ``<statesPath>/<service>``, the service's folder in an MCPMark
    checkout (``<statesPath>/test_environments``, ``<statesPath>/postgres_state``: one statesPath for all of
    MCPMark's services), then ``<statesPath>`` itself (MCPMark's folder of one service)."""
    from mcpfleet.runner.services import SERVICES

    if states_path is None:
        return [Path(pack_root) / service / "states"]
    known = SERVICES.get(service)
    checkout = [Path(states_path) / known.mcpmark_states] if known is not None and known.mcpmark_states else []
    return [Path(states_path) / service, *checkout, Path(states_path)]


def locate_state(pack_root: Path, states_path: Path | None, service: str, category: str) -> Path:
    """Where ``category``'s initial state folder is: the first candidate folder holding it (the first one when
    none does, so a missing state is reported at mcpfleet's own layout). Services whose states are files
    (``<category>.sql``) look in :attr:`Task.states_folder` and the same candidates."""
    name = category
    folders = state_folders(pack_root, states_path, service)
    return next((f / name for f in folders if (f / name).exists()), folders[0] / name)


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
class Mutant:
    """A plausible wrong end state: MCP tool calls replayed like the oracle's, which the verifier must reject.

    ``after_oracle`` replays the oracle's steps first (a near miss of the right answer); ``answer``, if set,
    is the final assistant message (for verifiers that read the conversation).
    """

    name: str
    why: str
    after_oracle: bool
    steps: tuple[OracleStep, ...]
    answer: str | None = None


def read_text(path: Path, limit: int) -> str:
    """A task file's text; TaskError naming the file when it is larger than ``limit`` bytes or not UTF-8."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None


def read_bytes(path: Path, limit: int) -> bytes:
    """A task file's bytes; TaskError naming the file when it is larger than ``limit`` bytes.

    Reads at most ``limit`` + 1 bytes: a huge (or sparse) file never reaches memory whole. Opened without
    blocking and refused unless it is a regular file: a named pipe in its place would block the reader for ever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TaskError(f"{path}: not a regular file; a task's {path.name} must be one")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TaskError(
            f"{path}: larger than {limit // 1024:,} KiB, the most a task's {path.name} may hold; shorten it (or "
            "move bulk data into the task's initial state)"
        )
    return data


def _load_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path, MAX_JSON_BYTES))
    except TaskError:
        raise
    except ValueError as exc:  # a JSONDecodeError, or an integer of more than 4,300 digits
        raise TaskError(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:  # arrays or objects nested deeper than Python's parser goes
        raise TaskError(f"{path}: not valid JSON: nested too deeply") from None


def json_kind(value: Any) -> str:
    """A JSON value's kind as JSON names it, for messages."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds = {list: "an array", str: "a string", int: "a number", float: "a number", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def _parse_steps(path: Path, where: str, steps: list[Any]) -> list[OracleStep]:
    out = []
    for i, s in enumerate(steps):
        if (
            not isinstance(s, dict)
            or not isinstance(s.get("tool"), str)
            or not isinstance(s.get("arguments", {}), dict)
        ):
            raise TaskError(f"{path}: {where}[{i}] needs a 'tool' string and an 'arguments' object")
        out.append(OracleStep(s["tool"], s.get("arguments", {})))
    return out


def parse_mutants(path: Path, data: Any) -> list[Mutant]:
    """Validate a loaded mutants.json; every error names the file and the mutant's index."""
    items = data.get("mutants") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise TaskError(
            f'{path}: expected {{"mutants": [{{"name": ..., "why": ..., "after_oracle": ..., "steps": [...]}}, ...]}}'
        )
    out: list[Mutant] = []
    for i, m in enumerate(items):
        where = f"mutants[{i}]"
        if not isinstance(m, dict):
            raise TaskError(f"{path}: {where} must be an object")
        unknown = sorted(set(m) - MUTANT_KEYS)
        if unknown:
            raise TaskError(f"{path}: {where} has unknown key(s) {', '.join(unknown)}; allowed: {sorted(MUTANT_KEYS)}")
        name = m.get("name")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise TaskError(f"{path}: {where}.name must be a string matching {NAME_RE.pattern}")
        if any(prev.name == name for prev in out):
            raise TaskError(f"{path}: {where}.name '{name}' is used twice")
        why = m.get("why")
        if not isinstance(why, str) or not why.strip():
            raise TaskError(f"{path}: {where} ('{name}').why must say why this end state is wrong")
        after_oracle = m.get("after_oracle")
        if not isinstance(after_oracle, bool):
            raise TaskError(f"{path}: {where} ('{name}').after_oracle must be true or false")
        steps = m.get("steps")
        if not isinstance(steps, list):
            raise TaskError(f"{path}: {where} ('{name}').steps must be a list of tool calls")
        answer = m.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise TaskError(f"{path}: {where} ('{name}').answer must be a string")
        if not steps and answer is None:
            what = "the oracle" if after_oracle else "the no-op agent"
            raise TaskError(f"{path}: {where} ('{name}') has no steps and no answer: it is {what}")
        parsed = _parse_steps(path, f"{where}.steps", steps)
        out.append(Mutant(name, why.strip(), after_oracle, tuple(parsed), answer))
    return out


@dataclass(frozen=True)
class Task:
    """One task folder. ``id`` is ``<service>/<difficulty>/<category>/<name>``."""

    service: str
    difficulty: str
    category: str
    name: str
    path: Path
    state_dir: Path = field(compare=False)  # initial state of the category (may not exist for a foreign pack)
    states_path: Path | None = field(default=None, compare=False)  # the spec's tasks.statesPath, if any

    @property
    def pack_root(self) -> Path:
        """The pack the task was found in (``<root>/<service>/<difficulty>/<category>/<task>``)."""
        parents = self.path.parents
        return parents[3] if len(parents) > 3 else self.path

    @property
    def state_bound(self) -> Path:
        """What the initial state must resolve within: ``tasks.statesPath`` when given, else the pack root (so a
        ``states`` folder that is itself a link out of the pack is refused). A task built by hand with a state
        elsewhere is bounded by its states folder."""
        if self.states_path is not None:
            return self.states_path
        root = self.pack_root
        return root if self.state_dir.is_relative_to(root) else self.states_folder

    @property
    def id(self) -> str:
        return f"{self.service}/{self.difficulty}/{self.category}/{self.name}"

    @cached_property
    def description(self) -> str:
        """description.md with its line ends read as MCPMark reads them (``Path.read_text``, universal newlines):
        a description saved on Windows reaches the model with LF line ends, not CRLF."""
        text = read_text(self.path / "description.md", MAX_DESCRIPTION_BYTES)
        return text.replace("\r\n", "\n").replace("\r", "\n")

    @cached_property
    def meta(self) -> dict[str, Any]:
        """meta.json, a JSON object; TaskError (naming the file) when it is not one, or when its ``"mcpfleet"``
        entry (mcpfleet's own settings) is not an object."""
        path = self.path / "meta.json"
        data = _load_json(path)
        if not isinstance(data, dict):
            raise TaskError(f"{path}: must hold a JSON object ({{...}}), not {json_kind(data)}")
        if not isinstance(data.get("mcpfleet") or {}, dict):
            raise TaskError(
                f'{path}: "mcpfleet" must be an object ({{"key": value, ...}}), not {data["mcpfleet"]!r:.80}'
            )
        return data

    @property
    def mcpmark_name(self) -> str:
        """MCPMark's task name: ``<category_id>__<task_id>``, from meta.json when it gives a non-empty string, else
        the folders (a null, a number or "" would name the task ``None__None``; the checks refuse them)."""
        try:
            meta = self.meta
        except (TaskError, OSError):
            meta = {}

        def given(key: str, folder: str) -> str:
            value = meta.get(key)
            return value if isinstance(value, str) and value.strip() else folder

        return f"{given('category_id', self.category)}__{given('task_id', self.name)}"

    @property
    def verifier(self) -> Path:
        return self.path / "verify.py"

    @property
    def states_folder(self) -> Path:
        """The states folder the category's state was found in (or is expected in)."""
        return self.state_dir.parent

    @property
    def state_times(self) -> Path:
        return self.state_dir.parent / f"{self.category}.times.json"

    @property
    def has_oracle(self) -> bool:
        return (self.path / "oracle.json").is_file()

    @cached_property
    def oracle(self) -> list[OracleStep]:
        path = self.path / "oracle.json"
        if not path.is_file():
            raise TaskError(f"{self.id}: no oracle.json; the oracle agent needs one")
        data = _load_json(path)
        steps = data.get("steps") if isinstance(data, dict) else None
        if not isinstance(steps, list) or not steps:
            raise TaskError(f'{path}: expected {{"steps": [{{"tool": ..., "arguments": {{...}}}}, ...]}}')
        return _parse_steps(path, "steps", steps)

    def oracle_problem(self) -> str | None:
        """Why oracle.json cannot be replayed (missing, unreadable, malformed); None when it can. For ``tasks
        validate`` and for a run that replays oracles (``preflight.oracle_problems``)."""
        try:
            _ = self.oracle
        except TaskError as exc:
            return str(exc)
        except OSError as exc:
            return f"{self.id}: oracle.json unreadable: {exc.strerror or exc}"
        return None

    @property
    def has_mutants(self) -> bool:
        return (self.path / "mutants.json").is_file()

    @cached_property
    def mutants(self) -> list[Mutant]:
        """The task's wrong end states (empty without mutants.json); a malformed file raises ``TaskError``."""
        path = self.path / "mutants.json"
        return parse_mutants(path, _load_json(path)) if path.is_file() else []

    @cached_property
    def oracle_answer(self) -> str | None:
        """The final answer an answer task's oracle gives (oracle.json "answer"), read by the verifier."""
        path = self.path / "oracle.json"
        try:
            data = _load_json(path) if path.is_file() else {}
        except (TaskError, OSError):  # not JSON, not UTF-8, too large: the oracle's own parse (``oracle``) reports it
            return None
        answer = data.get("answer") if isinstance(data, dict) else None
        return answer if isinstance(answer, str) else None

    @cached_property
    def digest(self) -> str:
        """Content hash of the task folder and its initial state: a changed verifier is a changed trial.

        The base hash is every file reached by ``rglob`` (names and contents), as it always was, so the trials of
        an ordinary task keep the hashes their records carry. What a trial also gets, which that misses, is added
        on top only where present (``_copy_extras``): what folder links lead to, empty folders, owner permission
        bits other than rw (files) and rwx (folders), ``__pycache__`` inside a state. File times are not hashed:
        an s3 sync and an image build do not keep them, so a pod would refuse its own task; a state whose times
        matter pins them in ``<category>.times.json``, which is hashed."""
        from mcpfleet.runner.services import SERVICES

        h = hashlib.sha256()
        extras = bytearray()
        service = SERVICES.get(self.service)
        for index, base in enumerate([self.path, *(service.state_files(self) if service else [])]):
            if base.is_dir():
                listed = sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
                for f in listed:
                    h.update(os.fsencode(f.relative_to(base)))  # a name need not be UTF-8 (as bytes on disk)
                    _hash_file(h, f)
                found = _copy_extras(base, {f.relative_to(base) for f in listed}, skip_pycache=index == 0)
                if found:
                    extras += _frame(b"base", str(index).encode(), found)
            elif base.is_file():
                _hash_file(h, base)
        if not extras:
            return h.hexdigest()[:16]
        return hashlib.sha256(h.digest() + b"\0copy-extras\0" + bytes(extras)).hexdigest()[:16]


def _hash_file(h: Any, path: Path) -> None:
    """Feed a file to ``h`` in chunks: a sparse file's apparent size is never held in memory."""
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)


def _frame(kind: bytes, name: bytes, payload: bytes = b"") -> bytes:
    """One length-prefixed record: no two different sequences of records run together alike."""
    return kind + len(name).to_bytes(4, "big") + name + len(payload).to_bytes(8, "big") + payload


def _copy_extras(base: Path, listed: set[Path], skip_pycache: bool) -> bytes:
    """What a copy of ``base`` (``shutil.copytree``: links followed) holds beyond the ``listed`` files' names and
    contents: files reached only through a folder link (with their contents), empty folders, and owner permission
    bits other than rw for a file or rwx for a folder. Loops and dangling links are skipped here (the pack checks
    refuse them); ``skip_pycache``: the task folder's caches are not part of the task."""
    out = bytearray()

    def walk(folder: Path, rel: Path, real: Path, ancestors: frozenset[Path]) -> None:
        try:
            with os.scandir(folder) as found:
                children = sorted((e for e in found if not (skip_pycache and e.name == "__pycache__")), key=_name)
        except OSError:  # unlistable: a copy fails on it, and the pack checks say so
            return
        if not children:
            out.extend(_frame(b"empty", os.fsencode(rel)))
        for entry in children:
            path, sub = Path(entry.path), rel / entry.name
            try:
                st = path.stat()
            except OSError:  # a dangling link copies nothing
                continue
            owner = (st.st_mode >> 6) & 0o7
            if stat.S_ISDIR(st.st_mode):
                target = path.resolve() if entry.is_symlink() else real / entry.name
                if target in ancestors:
                    continue
                if owner != 0o7:
                    out.extend(_frame(b"mode", os.fsencode(sub), bytes([owner])))
                walk(path, sub, target, ancestors | {target})
            elif stat.S_ISREG(st.st_mode):
                if owner != 0o6:
                    out.extend(_frame(b"mode", os.fsencode(sub), bytes([owner])))
                if sub not in listed:
                    content = hashlib.sha256()
                    try:
                        _hash_file(content, path)
                    except OSError:  # unreadable: a copy fails on it, and so does the trial
                        out.extend(_frame(b"unreadable", os.fsencode(sub)))
                        continue
                    out.extend(_frame(b"file", os.fsencode(sub), content.digest()))

    real = base.resolve()
    walk(base, Path("."), real, frozenset({real}))
    return bytes(out)


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def discover(root: Path, states_path: Path | None = None) -> list[Task]:
    """All task folders under a pack root, sorted by id; a folder is a task if it has description.md."""
    root = Path(root)
    if root.is_file():
        raise TaskError(f"task pack {root} is a file; set spec.tasks.path to the pack's root folder (MCPMark layout)")
    if not root.is_dir():
        raise TaskError(f"task pack {root} does not exist; set spec.tasks.path to a folder in MCPMark layout")
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
                f"spec.tasks.{name}: {given} {verb} of the {len(left)} task(s) left under {root}; there are: {listed}"
            )
        left = kept
    return f"spec.tasks: the filters select no task under {root}"  # pragma: no cover - select() would agree


def check_selected(tasks: list[Task]) -> None:
    """Refuse the run when a selected task cannot run at all: a missing file, a misnamed folder, a link out of the
    pack, a meta.json that is not a JSON object or names the task with a non-string id, a blank description, a
    verify.py Python cannot compile or that holds no statement (it would pass every trial), or a "mcpfleet" key
    its service does not know. (The full checks, oracle included, are ``mcpfleet tasks validate``'s.)"""
    from mcpfleet.runner.services import SERVICES

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
        head = f"task pack: {len(problems)} problem(s) in the selected tasks; nothing was run"
        more = [f"... and {len(problems) - 10} more"] if len(problems) > 10 else []
        raise PackCheckError("\n  ".join([head, *problems[:10], *more, "check with: mcpfleet tasks validate <pack>"]))


def load_selection(sel: TaskSelection, base_dir: Path) -> list[Task]:
    root, states = resolve_pack(sel, base_dir)
    found = discover(root, states)
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
    if problem := _outside_pack(path, Path(root), task_id):
        raise TaskError(problem)
    return Task(
        service,
        difficulty,
        category,
        name,
        path=path,
        state_dir=locate_state(Path(root), states_path, service, category),
        states_path=states_path,
    )


def _outside_pack(path: Path, root: Path, task_id: str) -> str | None:
    """Why ``path`` (a task folder or file) is not usable: it resolves outside the pack (``states.contained``)."""
    from mcpfleet.runner.environment.states import contained

    try:
        contained(path, root, f"{task_id}:", "the pack ")
    except TaskError as exc:
        return str(exc)
    return None


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
    from mcpfleet.runner.services import SERVICES

    problems = name_problems(task.service, task.difficulty, task.category, task.name)
    if problem := _outside_pack(task.path, task.pack_root, task.id):
        return [*problems, problem]
    known = SERVICES.get(task.service)
    files = known.required_files if known is not None else REQUIRED_FILES
    for f in dict.fromkeys([*files, "oracle.json", "mutants.json"]):
        path = task.path / f
        if f in files and not path.is_file():
            problems.append(f"{task.id}: missing {f}" + (" (it is not a regular file)" if path.exists() else ""))
        elif (path.exists() or path.is_symlink()) and (problem := _outside_pack(path, task.pack_root, task.id)):
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
    from mcpfleet.runner.services import SERVICES

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
    from mcpfleet.runner.services import SERVICES

    service = SERVICES.get(task.service)
    try:
        return service is not None and bool(service.check_state(task))
    except (TaskError, OSError):
        return False


def inspect_task(task: Task) -> TaskCheck:
    """``check_task``, also saying whether the problems include the task's missing state (``tasks validate``'s
    hint about ``--states`` reads it rather than checking every state again)."""
    from mcpfleet.runner.services import SERVICES

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
