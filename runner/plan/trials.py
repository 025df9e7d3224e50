"""A run's planned trials kept as the inputs they are expanded from, each trial's spec built when it is asked for.

The operator holds a run's plan for as long as the run goes, and a ``TrialSpec`` is ~1.7 KB: 100,000 of them held
for the whole run were most of its memory. ``Plan`` keeps what ``expand`` expands (the ordered tasks, each with
its shards, server variants and service params; the models; the attempts) and computes trial ``i``, its id and
its spec hash from ``i`` by arithmetic, and a trial id's index by parsing the id: memory in tasks and models,
not in trials. ``Plan`` and ``expand`` give the same trials in the same order (``tests/test_plan_trials.py``
checks every trial of varied plans). ``Listed`` is the same interface over trials already built (tests, the
launch-order simulation).
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, overload

from mcpfleet.runner.plan.expand import (
    check_plan_size,
    check_variants,
    service_params,
    shards_of,
    task_weight,
    trial_id,
    variants_of,
    with_variant_paths,
)
from mcpfleet.runner.spec.evalrun import EvalRun, ToolCallSettings
from mcpfleet.runner.spec.load import canonical_hash
from mcpfleet.runner.spec.service_decl import ServerVariant
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.spec.trial import TrialSpec
from mcpfleet.runner.tasks.digest import task_digest
from mcpfleet.runner.tasks.discovery import load_selection, resolve_pack

SHARD = re.compile(r"^(?P<name>.+)-s(?P<shard>\d{4,})$")


class Planned(NamedTuple):
    """What a reader of the plan as a whole needs of a trial (plan.json, summary.json, the plan's hash)."""

    trial_id: str
    spec_hash: str


class Trials(Mapping[str, TrialSpec]):
    """A run's planned trials: trial id -> its spec, in plan order. Lookups by id answer without building specs."""

    @property
    def ids(self) -> Sequence[str]:
        """The trial ids in plan order (a view: nothing held per trial)."""
        return _Ids(self)

    def id_at(self, i: int) -> str:
        raise NotImplementedError

    def spec_at(self, i: int) -> TrialSpec:
        raise NotImplementedError

    def hash_at(self, i: int) -> str:
        raise NotImplementedError

    def task_at(self, i: int) -> str:
        raise NotImplementedError

    def model_at(self, i: int) -> str:
        raise NotImplementedError

    def index(self, tid: object) -> int | None:
        """The trial's position in the plan, None for an id it does not have."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:
        return (self.id_at(i) for i in range(len(self)))

    def __contains__(self, tid: object) -> bool:
        return self.index(tid) is not None

    def __getitem__(self, tid: str) -> TrialSpec:
        i = self.index(tid)
        if i is None:
            raise KeyError(tid)
        return self.spec_at(i)

    def spec_hash(self, tid: object) -> str | None:
        i = self.index(tid)
        return None if i is None else self.hash_at(i)

    def task_of(self, tid: str) -> str:
        i = self.index(tid)
        if i is None:
            raise KeyError(tid)
        return self.task_at(i)

    def model_of(self, tid: str) -> str:
        i = self.index(tid)
        if i is None:
            raise KeyError(tid)
        return self.model_at(i)

    def planned(self) -> Iterator[Planned]:
        """Every trial's id and spec hash, in plan order (computed, not held)."""
        return (Planned(self.id_at(i), self.hash_at(i)) for i in range(len(self)))

    @cached_property
    def digest(self) -> str:
        """One digest of the planned trials and what each measures: equal plans, equal results."""
        lines = sorted(f"{tid}:{h}" for tid, h in self.planned())
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]

    def column(self, of: Callable[[int], Any]) -> Mapping[str, Any]:
        """Trial id -> ``of(index)``, computed per lookup (the launch order's task and model of a trial)."""
        return _Column(self, of)

    def firsts(self) -> Iterator[tuple[str, str]]:
        """(task, model) of the trials in plan order; only each task's and each model's first place matters (the
        launch order's tie-breakers), so a plan may give fewer pairs in the same first-seen order."""
        return ((self.task_at(i), self.model_at(i)) for i in range(len(self)))

    def samples(self) -> list[TrialSpec]:
        """One trial of each (service, server variant): what the operator checks a pod of before any exists."""
        seen: dict[tuple[str, str | None], TrialSpec] = {}
        for i in self.first_of_each():
            t = self.spec_at(i)
            seen.setdefault((t.service, t.variant), t)
        return list(seen.values())

    def first_of_each(self) -> Iterator[int]:
        """Indices covering every (service, variant) of the plan; every index by default."""
        return iter(range(len(self)))


def as_trials(trials: Trials | Sequence[TrialSpec]) -> Trials:
    """``trials`` as a ``Trials``: a list of built trials is wrapped (``Listed``)."""
    return trials if isinstance(trials, Trials) else Listed(trials)


class _Column(Mapping[str, Any]):
    def __init__(self, trials: Trials, of: Callable[[int], Any]) -> None:
        self.trials, self.of = trials, of

    def __getitem__(self, tid: str) -> Any:
        i = self.trials.index(tid)
        if i is None:
            raise KeyError(tid)
        return self.of(i)

    def __iter__(self) -> Iterator[str]:
        return iter(self.trials)

    def __len__(self) -> int:
        return len(self.trials)


class _Ids(Sequence[str]):
    def __init__(self, trials: Trials) -> None:
        self.trials = trials

    def __len__(self) -> int:
        return len(self.trials)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self.trials.id_at(j) for j in range(len(self))[i]]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.trials.id_at(i)

    def __iter__(self) -> Iterator[str]:
        return iter(self.trials)

    def __contains__(self, tid: object) -> bool:
        return tid in self.trials

    def index(self, tid: Any, start: int = 0, stop: int | None = None) -> int:
        i = self.trials.index(tid)
        if i is None:
            raise ValueError(tid)
        return i


class Listed(Trials):
    """Trials already built, in the given order."""

    def __init__(self, trials: Sequence[TrialSpec]) -> None:
        self.list = list(trials)
        self.pos = {t.trial_id: i for i, t in enumerate(self.list)}

    def __len__(self) -> int:
        return len(self.list)

    def index(self, tid: object) -> int | None:
        return self.pos.get(tid) if isinstance(tid, str) else None

    def id_at(self, i: int) -> str:
        return self.list[i].trial_id

    def spec_at(self, i: int) -> TrialSpec:
        return self.list[i]

    def hash_at(self, i: int) -> str:
        return self.list[i].spec_hash

    def task_at(self, i: int) -> str:
        return self.list[i].task_id

    def model_at(self, i: int) -> str:
        return self.list[i].model.name


@dataclass(frozen=True)
class _Task:
    """One task of the plan with what each of its trials shares (computed once, not per trial)."""

    task: Task
    shards: list[int | None]
    variants: list[ServerVariant | None]
    digest: str
    params: dict[str, Any]
    settings: ToolCallSettings | None
    first: int  # plan index of its first trial
    attempt_block: int  # trials per shard: attempts x models x variants


class Plan(Trials):
    """models x tasks x attempts in ``expand``'s order, computed per trial (see the module's docstring)."""

    def __init__(self, run: EvalRun, tasks: list[Task], tasks_root: Path, states_path: Path | None = None) -> None:
        ordered = sorted(tasks, key=lambda t: (-task_weight(t), t.id))
        check_variants(run, ordered)
        cuts = {task.id: shards_of(run, task) for task in ordered}
        check_plan_size(run, len(ordered), sum(len(cuts[t.id]) * len(variants_of(run, t)) for t in ordered))
        spec = run.spec
        self.run, self.models, self.attempts = run, spec.models, spec.attempts
        self.tasks_root, self.states_path = str(tasks_root), str(states_path) if states_path else None
        self.judge = spec.toolcalls.judge.lent(spec.models) if spec.toolcalls and spec.toolcalls.judge else None
        self.model_of_name = {m.name: i for i, m in enumerate(spec.models)}
        # What every trial's hash holds, dumped once (trial_hash dumps them per trial).
        self.model_dumps = [
            m.model_dump(mode="json", include={"name", "model", "api_base", "params"}) for m in spec.models
        ]
        self.limits_dump = spec.limits.model_dump(mode="json")
        self.measured = (spec.toolcalls or ToolCallSettings()).measured()
        self.tasks: list[_Task] = []
        self.starts: list[int] = []
        self.by_key: dict[tuple[str, str, str, str], int] = {}  # (service, difficulty, category, name) -> task
        n = 0
        for task in ordered:
            shards, variants = cuts[task.id], variants_of(run, task)
            settings = (spec.toolcalls or ToolCallSettings()) if shards != [None] else None
            if settings is not None and settings.judge is not None:
                settings = settings.model_copy(update={"judge": self.judge})
            block = spec.attempts * len(spec.models) * len(variants)
            self.tasks.append(
                _Task(task, shards, variants, task_digest(task), service_params(task), settings, n, block)
            )
            self.starts.append(n)
            self.by_key[(task.service, task.difficulty, task.category, task.name)] = len(self.tasks) - 1
            n += block * len(shards)
        self.size = n

    def __len__(self) -> int:
        return self.size

    def _locate(self, i: int) -> tuple[_Task, int | None, int, int, ServerVariant | None]:
        """Trial ``i``'s task, shard, attempt, model index and variant (``expand``'s loop order)."""
        if not 0 <= i < self.size:
            raise IndexError(i)
        t = self.tasks[bisect.bisect_right(self.starts, i) - 1]
        local = i - t.first
        shard, rest = divmod(local, t.attempt_block)
        per_attempt = len(self.models) * len(t.variants)
        attempt, rest = divmod(rest, per_attempt)
        model, variant = divmod(rest, len(t.variants))
        return t, t.shards[shard], attempt + 1, model, t.variants[variant]

    def id_at(self, i: int) -> str:
        t, shard, attempt, model, variant = self._locate(i)
        return trial_id(self.models[model].name, t.task, attempt, shard, variant.name if variant else None)

    def hash_at(self, i: int) -> str:
        t, shard, attempt, model, variant = self._locate(i)
        return self._hash(t, shard, attempt, model, variant)

    def _hash(self, t: _Task, shard: int | None, attempt: int, model: int, variant: ServerVariant | None) -> str:
        """``expand.trial_hash``, from the dumps made once."""
        what: dict[str, object] = {
            "model": self.model_dumps[model],
            "agent": self.run.spec.agent,
            "limits": self.limits_dump,
            "task": t.task.id,
            "task_digest": t.digest,
            "attempt": attempt,
        }
        if shard is not None:
            what["shard"] = shard
            what["toolcalls"] = self.measured
        if variant is not None:
            what["server"] = variant.model_dump(mode="json", exclude_none=True)
        return canonical_hash(what)

    def task_at(self, i: int) -> str:
        return self._locate(i)[0].task.id

    def model_at(self, i: int) -> str:
        return self.models[self._locate(i)[3]].name

    def spec_at(self, i: int) -> TrialSpec:
        t, shard, attempt, model, variant = self._locate(i)
        spec, m = self.run.spec, self.models[model]
        return TrialSpec(
            run=self.run.name,
            trial_id=trial_id(m.name, t.task, attempt, shard, variant.name if variant else None),
            spec_hash=self._hash(t, shard, attempt, model, variant),
            model=m,
            task_id=t.task.id,
            tasks_root=self.tasks_root,
            states_path=self.states_path,
            task_digest=t.digest,
            attempt=attempt,
            agent=spec.agent,
            limits=spec.limits,
            shard=shard,
            toolcalls=t.settings,
            provider=spec.provider,
            budget=spec.budget,
            judge=self.judge if shard is None else None,
            service_params=t.params,
            server=variant,
        )

    def index(self, tid: object) -> int | None:
        """Parse ``<model>.<service>[@variant].<difficulty>.<category>.<task>[-sNNNN].<attempt>`` (model and variant
        names are DNS labels, task path parts [A-Za-z0-9_-]: no dots), then check the id trial ``i`` has is ``tid``."""
        if not isinstance(tid, str):
            return None
        parts = tid.split(".")
        if len(parts) != 6 or not parts[5].isdigit():
            return None
        model = self.model_of_name.get(parts[0])
        attempt = int(parts[5])
        if model is None or not 1 <= attempt <= self.attempts:
            return None
        service, _, variant_name = parts[1].partition("@")
        found = self.by_key.get((service, parts[2], parts[3], parts[4]))
        shard: int | None = None
        if found is None or self.tasks[found].shards != [None]:
            m = SHARD.match(parts[4])
            if m is None:
                return None
            found, shard = self.by_key.get((service, parts[2], parts[3], m["name"])), int(m["shard"])
            if found is None:
                return None
        t = self.tasks[found]
        names = [v.name if v else "" for v in t.variants]
        if variant_name not in names or (shard is not None and shard not in t.shards):
            return None
        block = t.shards.index(shard)
        i = (
            t.first
            + block * t.attempt_block
            + (attempt - 1) * len(self.models) * len(t.variants)
            + model * len(t.variants)
            + names.index(variant_name)
        )
        return i if self.id_at(i) == tid else None

    def planned(self) -> Iterator[Planned]:
        """Every trial's id and spec hash in plan order: ``expand``'s loops, not a lookup per trial."""
        for t in self.tasks:
            for shard in t.shards:
                for attempt in range(1, self.attempts + 1):
                    for model, m in enumerate(self.models):
                        for variant in t.variants:
                            tid = trial_id(m.name, t.task, attempt, shard, variant.name if variant else None)
                            yield Planned(tid, self._hash(t, shard, attempt, model, variant))

    def firsts(self) -> Iterator[tuple[str, str]]:
        """Each task's first trials, one per model: the same first places as every trial's."""
        return ((t.task.id, m.name) for t in self.tasks for m in self.models)

    def first_of_each(self) -> Iterator[int]:
        """The first trial of every variant of every task: every (service, variant) the plan has."""
        for t in self.tasks:
            yield from (t.first + v for v in range(len(t.variants)))


def lazy_plan(run: EvalRun, base_dir: Path, tasks: list[Task] | None = None) -> Plan:
    """``expand.plan`` as a ``Plan``: the run's trials, computed when asked for."""
    root, states = resolve_pack(run.spec.tasks, base_dir)
    chosen = load_selection(run.spec.tasks, base_dir) if tasks is None else tasks
    return Plan(with_variant_paths(run, base_dir), chosen, root, states)
