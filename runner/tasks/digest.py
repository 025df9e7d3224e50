"""A task's content digest: a changed verifier, oracle or initial state is a changed trial."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, cast

from mcpfleet.runner.services import Service, service_of
from mcpfleet.runner.spec.task import Task


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


def task_digest(task: Task) -> str:
    """The task's content digest (see ``_digest``), computed once per ``Task`` instance and kept on it as a
    cached property would be: planning asks for it once per trial, and a fresh ``Task`` reads the folder again."""
    cached = task.__dict__.get(_CACHE)
    if cached is None:
        cached = task.__dict__[_CACHE] = _digest(task)
    return cast(str, cached)


_CACHE = "_mcpfleet_digest"


def _digest(task: Task) -> str:
    """Content hash of the task folder and its initial state: a changed verifier is a changed trial.

    The base hash is every file reached by ``rglob`` (names and contents), as it always was, so the trials of
    an ordinary task keep the hashes their records carry. What a trial also gets, which that misses, is added
    on top only where present (``_copy_extras``): what folder links lead to, empty folders, owner permission
    bits other than rw (files) and rwx (folders), ``__pycache__`` inside a state. File times are not hashed:
    an s3 sync and an image build do not keep them, so a pod would refuse its own task; a state whose times
    matter pins them in ``<category>.times.json``, which is hashed."""
    h = hashlib.sha256()
    extras = bytearray()
    try:
        service: Service | None = service_of(task.service, task.pack_root)
    except ValueError:  # a service neither bundled nor declared: refused elsewhere, its folder still hashed
        service = None
    for index, base in enumerate([task.path, *(service.state_files(task) if service else [])]):
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


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name
