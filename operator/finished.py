"""A run's finished trials, counted rather than held: which trials finished, and tallies of their outcomes.

Status, metrics and the run's ending need counts (passed, failed, not scored by outcome), pass@1 per model x
service x attempt, and the spend; their records are in the store. So a finished trial costs the run a dict entry
(its id -> a small int naming its outcome's key: passed, failure, model, service, attempt, variant), not a record:
the keys are few (models x services x attempts x outcomes), shared by every trial with that outcome, and each
tally is kept as trials finish, so a status write reads tallies rather than every finished trial. Pure.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator
from typing import Any

# What is kept of a finished trial's record: its outcome's key (and whether its LLM calls had a price).
FIELDS = ("passed", "failure", "model", "service", "attempt", "variant")
Key = tuple[bool, Any, Any, Any, Any, Any]


def key_of(outcome: dict[str, Any]) -> tuple[Key, bool]:
    key = (
        bool(outcome.get("passed")),
        outcome.get("failure"),
        outcome.get("model"),
        outcome.get("service"),
        outcome.get("attempt"),
        outcome.get("variant") or None,
    )
    return key, bool(outcome.get("cost"))


class Finished:
    """Trial id -> its outcome (a mapping, as runstate's ``done`` was): ``finished[tid]`` rebuilds the compact
    outcome from its key (``cost`` is tallied per key, not kept per trial: None there)."""

    def __init__(self) -> None:
        self.of: dict[str, int] = {}  # trial id -> index of its key
        self.keys: list[tuple[Key, bool]] = []
        self.index: dict[tuple[Key, bool], int] = {}
        self.tally: collections.Counter[int] = collections.Counter()  # key -> finished trials
        self.cost: collections.defaultdict[int, float] = collections.defaultdict(float)  # key -> priced spend (USD)
        self.priced: collections.Counter[int] = collections.Counter()  # key -> trials with a price

    # -- the mapping ------------------------------------------------------------------------------
    def __contains__(self, tid: object) -> bool:
        return tid in self.of

    def __len__(self) -> int:
        return len(self.of)

    def __bool__(self) -> bool:
        return bool(self.of)

    def __iter__(self) -> Iterator[str]:
        return iter(self.of)

    def __getitem__(self, tid: str) -> dict[str, Any]:
        return self.outcome(self.of[tid])

    def __setitem__(self, tid: str, outcome: dict[str, Any]) -> None:
        if tid in self.of:
            del self[tid]  # a trial's outcome replaced (never counted twice)
        key = key_of(outcome)
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.keys)
            self.keys.append(key)
        self.of[tid] = i
        self.tally[i] += 1
        if cost := outcome.get("cost"):
            self.cost[i] += float(cost)
            self.priced[i] += 1

    def __delitem__(self, tid: str) -> None:
        """A finished trial to run again (a stopped model resumed). Its cost leaves the spend with the other trials
        of its key, all of which are removed together (resume_models removes every trial of such an outcome)."""
        i = self.of.pop(tid)
        self.tally[i] -= 1
        if self.keys[i][1]:  # a priced trial: its share of its key's spend
            self.cost[i] -= self.cost[i] / self.priced[i]
            self.priced[i] -= 1

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return ((tid, self.outcome(i)) for tid, i in self.of.items())

    def values(self) -> Iterator[dict[str, Any]]:
        return (self.outcome(i) for i in self.of.values())

    def outcome(self, i: int) -> dict[str, Any]:
        out = dict(zip(FIELDS, self.keys[i][0], strict=True))
        if not out["variant"]:
            del out["variant"]
        out["cost"] = None
        return out

    def keep(self, tids: Iterable[str] | dict[str, Any]) -> None:
        """Forget the finished trials not among ``tids`` (an edit planned the run again without them)."""
        wanted = tids if isinstance(tids, dict) else set(tids)
        for tid in [t for t in self.of if t not in wanted]:
            del self[tid]

    # -- the tallies ------------------------------------------------------------------------------
    def counted(self) -> Iterator[tuple[Key, int]]:
        """Each outcome's key with how many finished trials have it (zero counts left out)."""
        return ((self.keys[i][0], n) for i, n in self.tally.items() if n)

    def spend(self) -> tuple[float, int]:
        """The priced trials' spend (USD) and how many they are."""
        return sum(self.cost.values()), sum(self.priced.values())
