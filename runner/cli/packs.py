"""Which pack and which of its tasks a command's PATH means (``tasks list``, ``tasks validate``, ``tasks stress``)."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.runner.spec.task import Task

DEFAULT_TASKS = Path(__file__).resolve().parents[2] / "tasks"


def tasks_at(path: Path, states: Path | None = None) -> tuple[Path, list[Task]]:
    """The root of the pack ``path`` is, or is inside, and the tasks under ``path`` (``tasks list`` and ``tasks
    validate``). Any folder inside a pack narrows it: a service, a difficulty, a category or one task folder
    (<root>/<service>/<difficulty>/<category>/<task>); the pack root is the ancestor holding the service. Unless
    the folder is a pack root itself: a pack kept under ~/bench/postgres/ is not the "postgres" service's."""
    from mcpfleet.runner.services import SERVICES
    from mcpfleet.runner.spec.service_decl import DECLARATION_FILE
    from mcpfleet.runner.tasks.discovery import discover

    def services_of(folder: Path) -> list[str]:  # bundled ones, and those the folder's pack declares
        return [*SERVICES, *(p.parent.name for p in folder.glob(f"*/{DECLARATION_FILE}"))]

    path = path.resolve()
    root, only = path, None
    holds_tasks = any(next(path.glob(f"{s}/*/*/*/description.md"), None) for s in services_of(path))
    for ancestor in [] if holds_tasks else path.parents:
        inside = path.relative_to(ancestor).parts
        if len(inside) <= 4 and (inside[0] in SERVICES or (ancestor / inside[0] / DECLARATION_FILE).is_file()):
            root, only = ancestor, path
            break
    return root, [t for t in discover(root, states) if only is None or t.path.is_relative_to(only)]
