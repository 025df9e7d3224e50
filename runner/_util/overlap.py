"""Whether one local path is, or lies inside, another, links followed: the one check behind every refusal to
write where something must stay untouched (a report or an export inside the run folder it reads, a run folder
inside a task pack or a states folder, a materialised state inside the state it copies)."""

from __future__ import annotations

from pathlib import Path


def resolved(path: Path) -> Path:
    """``path`` absolute, ``~`` expanded and links followed. A link that loops raises RuntimeError ("Symlink
    loop ...", Python 3.11's Path.resolve), which the CLI's main() reports as one line."""
    return path.expanduser().resolve()


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it, once both are resolved."""
    return resolved(path).is_relative_to(resolved(folder))


def overlap(a: Path, b: Path) -> bool:
    """Whether either path is, or lies inside, the other."""
    return inside(a, b) or inside(b, a)
