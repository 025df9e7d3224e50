"""Task packs kept in S3 (``spec.tasks.path: s3://bucket/prefix``), mirrored into a local folder.

The operator (to plan), ``mcpfleet run`` (to plan and run) and a trial pod's init container (to fetch
one task and its initial state) all read the pack through ``sync``, so they see the same bytes and
compute the same task digests. A mirror is refreshed by ETag: unchanged objects are not downloaded
again, objects gone from S3 are removed, and concurrent syncs of one mirror take turns (file lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from mcpfleet.runner._util.cachedir import cache_dir
from mcpfleet.runner.results.store import S3Store, S3Tuning, parse_s3_uri
from mcpfleet.runner.services import get_service
from mcpfleet.runner.spec.task import TaskError

MANIFEST = ".mcpfleet-sync.json"
LOCK = ".mcpfleet-sync.lock"


class PackError(TaskError):
    """The pack cannot be used as given (empty prefix, unsafe key); the message names the field and fix."""


def mirror_path(uri: str, endpoint_url: str | None) -> Path:
    """One mirror per (endpoint, URI): the same prefix on two endpoints is two packs."""
    digest = hashlib.sha256(f"{endpoint_url or ''}|{uri.rstrip('/')}".encode()).hexdigest()[:16]
    return cache_dir() / digest


NAME_MAX = 249  # bytes in one key part: a file name holds 255 (ext4, xfs), and a download adds "." and ".part"


def _safe_rel(rel: str, key: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise PackError(f"refusing S3 key part '{rel}': a pack's keys must stay inside its prefix")
    for part in p.parts:
        if part.startswith(".mcpfleet-sync"):
            raise PackError(f"refusing S3 key {key}: '{part}' is the name of the mirror's own files; rename it")
        if len(part.encode()) > NAME_MAX:
            raise PackError(
                f"refusing S3 key {key}: its part '{part[:40]}...' is longer than the mirror can name a file "
                f"({NAME_MAX} bytes); shorten it"
            )
    return p


def _make_room(dest: Path, target: Path) -> None:
    """Folders for ``target`` inside ``dest``, where an earlier version of the pack may have had a file where a
    folder is now (or the other way round): what is in the way goes (this listing has no such clash itself)."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    folder = dest
    for part in target.relative_to(dest).parent.parts:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)


def _clashes(rels: Iterable[str]) -> list[str]:
    """Keys that are both a file and a folder of other keys (``a/b`` and ``a/b/c``): no folder can mirror both."""
    names = set(rels)
    return sorted({str(parent) for rel in names for parent in PurePosixPath(rel).parents if str(parent) in names})


def sync(
    uri: str,
    dest: Path,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    only: Iterable[str] | None = None,
    env: Mapping[str, str] | None = None,
    tuning: S3Tuning | None = None,
    field: str = "spec.tasks.path",
) -> Path:
    """Mirror ``uri`` (or only the given relative prefixes of it) into ``dest``; returns ``dest``.

    Raises PackError when nothing is there, StoreError when S3 cannot be reached (after retries)."""
    bucket, prefix = parse_s3_uri(uri)
    store = S3Store(bucket, prefix, "", endpoint_url=endpoint_url, region=region, env=env, tuning=tuning, bare=True)
    base = f"{prefix}/" if prefix else ""
    scopes = [s.strip("/") for s in only] if only is not None else [""]
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest_path = dest / MANIFEST
        try:
            manifest: dict[str, str] = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            manifest = {}
        listed: dict[str, tuple[str, str, int]] = {}
        for scope in scopes:
            # A scope is a folder ("svc/diff/cat/task") or a single file ("svc/states/cat.times.json").
            for key, etag, size in store.list_objects(base + scope if scope else base):
                rel = key[len(base) :]
                if not rel or rel.endswith("/"):
                    continue  # folder markers some tools create
                if scope and rel != scope and not rel.startswith(scope + "/"):
                    continue  # "cat" must not pull in "cat2"
                listed[str(_safe_rel(rel, key))] = (key, etag, size)
        if not listed:
            what = f" (looked for {', '.join(scopes)})" if only is not None else ""
            raise PackError(
                f"{field}: nothing found under {uri}{what}; upload the pack in MCPMark layout there or fix the URI"
            )
        if clash := _clashes(listed):
            raise PackError(
                f"{field}: {uri} holds '{clash[0]}' both as an object and as a folder of others "
                f"({len(clash)} such key(s)); remove one of them"
            )
        # Objects gone from the listing go first: a new key may need one's name for its folder.
        for rel in [r for r in manifest if r not in listed and _in_scopes(r, scopes)]:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
                (dest / rel).unlink()
            del manifest[rel]
        for rel, (key, etag, size) in sorted(listed.items()):
            target = dest / rel
            if manifest.get(rel) == etag and target.is_file() and target.stat().st_size == size:
                continue
            _make_room(dest, target)
            tmp = target.with_name(f".{target.name}.part")
            if not store.get_to_file(key, tmp):  # deleted between listing and reading: the next sync settles it
                tmp.unlink(missing_ok=True)
                continue
            os.replace(tmp, target)
            manifest[rel] = etag
        tmp_manifest = manifest_path.with_suffix(".part")
        tmp_manifest.write_text(json.dumps(manifest, sort_keys=True))
        os.replace(tmp_manifest, manifest_path)
    return dest


def _in_scopes(rel: str, scopes: list[str]) -> bool:
    return any(not s or rel == s or rel.startswith(s + "/") for s in scopes)


def task_scopes(task_id: str, states_in_pack: bool) -> list[str]:
    """What one trial needs from a pack: its task folder and, if the pack holds states, its category's state."""
    service, _, category, _ = task_id.split("/")
    scopes = [task_id]
    if states_in_pack:
        scopes += [f"{service}/states/{name}" for name in get_service(service).state_names(category)]
    return scopes


def state_scopes(task_id: str) -> list[str]:
    """What one trial needs from a separate states location (``spec.tasks.statesPath``): its category's
    state in mcpfleet's layout (``<service>/<category>``), an MCPMark checkout's (``test_environments/<category>``)
    or one MCPMark states folder's (``<category>``), whichever is there."""
    service, _, category, _ = task_id.split("/")
    known = get_service(service)
    names = known.state_names(category)
    mcpmark = [f"{known.mcpmark_states}/{name}" for name in names] if known.mcpmark_states else []
    return [f"{service}/{name}" for name in names] + mcpmark + names
