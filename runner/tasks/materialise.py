"""A task's initial state written into a folder, the way its service keeps states (``mcpfleet materialise``)."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.runner.services import service_of
from mcpfleet.runner.spec.task import Task


def materialise(task: Task, dest: Path) -> int:
    """Materialise ``task``'s initial state into ``dest``, the way its service keeps states."""
    return service_of(task.service, task.pack_root).materialise(task, dest)
