"""A task folder as every layer sees it: its files, oracle steps, mutants and where its initial state is."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

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


def state_folders(pack_root: Path, states_path: Path | None, service: str, mcpmark_states: str | None) -> list[Path]:
    """Folders that may hold a service's states, in order of preference: the pack's bundled
    ``<service>/states`` without a statesPath; else ``<statesPath>/<service>``, the service's folder in an MCPMark
    checkout (``<statesPath>/test_environments``, ``<statesPath>/postgres_state``: one statesPath for all of
    MCPMark's services), then ``<statesPath>`` itself (MCPMark's folder of one service). ``mcpmark_states``: the
    service's folder in such a checkout (``Service.mcpmark_states``)."""
    if states_path is None:
        return [Path(pack_root) / service / "states"]
    checkout = [Path(states_path) / mcpmark_states] if mcpmark_states else []
    return [Path(states_path) / service, *checkout, Path(states_path)]


@dataclass(frozen=True)
class OracleStep:
    tool: str
    arguments: dict[str, Any]

    def resolve(self, root: str) -> dict[str, Any]:
        return substitute_root(self.arguments, root)


def substitute_root(value: Any, root: str) -> Any:
    """``{root}`` replaced by ``root`` in a (JSON) value's strings, keys left alone."""
    if isinstance(value, str):
        return value.replace(ROOT_TOKEN, root)
    if isinstance(value, list):
        return [substitute_root(v, root) for v in value]
    if isinstance(value, dict):
        return {k: substitute_root(v, root) for k, v in value.items()}
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
    # What the trial's service appends to description.md as sent to the model (a declared service's ``prompt``).
    prompt: str | None = field(default=None, compare=False)

    def with_prompt(self, prompt: str | None) -> Task:
        """The task as its trial's model reads it: description.md, then ``prompt`` after a blank line."""
        return dataclasses.replace(self, prompt=prompt)

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
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        return f"{text.rstrip()}\n\n{self.prompt}" if self.prompt else text

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
        if isinstance(steps, list) and not steps:
            raise TaskError(
                f"{path}: no steps; list the tool calls that solve the task, in order "
                '({"steps": [{"tool": ..., "arguments": {...}}, ...]}, {root} being the trial\'s state folder)'
            )
        if not isinstance(steps, list):
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
