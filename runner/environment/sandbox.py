"""A private mount namespace for a trial's escape-capable processes: what the agent can make read files (a trial
cluster's superuser through ``COPY ... PROGRAM`` and ``pg_read_file``; the browser through ``view-source:file://``)
must not find the task packs (verifiers, oracle solutions), the run's output (other trials' transcripts and
results), the packs cache, or other trials' folders.

``plan`` says what to hide: the roots every run has (``default_hidden``: the packs cache, the bundled tasks, the
folders modules register with ``register_root``, and ``$MCPFLEET_SANDBOX_HIDE``), the temp folder, /dev/shm and
/var/tmp (other trials' folders, and what one trial would leave for the next; a fresh writable one instead), and
what the caller adds. Each is covered by an empty tmpfs;
``keep`` (the trial's own folder, the server's binaries) is bound back at its own path inside. Two ways to enter:
``preexec`` for a ``subprocess.Popen`` the caller makes (a fork that unshares, mounts, then drops to the server's
user), ``command`` for a command line someone else spawns (``unshare`` with a new pid namespace and /proc too: a
process running as root could otherwise reach every file through ``/proc/<pid>/root`` of a process outside).

As root, both ways work. Not root, only ``command`` does: its namespaces live in a user namespace of their own,
mapping the run's user to root there (``unshare`` can then mount), the mounts locked so the server cannot lift
them; the kernel must allow unprivileged user namespaces. ``preexec`` has no pid namespace, and without one a
process of the run's own uid reaches every file around the mounts through ``/proc/<pid>/root`` of the run's
processes: a plan for it is None when not root. Where nothing can be hidden, nothing is, with one warning.
``command``'s second half, in the new namespaces, is ``mcpfleet-sandbox-exec`` (servers/bridge/sandbox-exec.c, a
static C port of ``main``: ~17 ms sooner per server start than Python's start-up) where it is built, else this module
(``python -I -S sandbox.py --hide P ... -- argv``): few imports. ``main`` stays the reference the C port follows.
"""

from __future__ import annotations

# Only what ``main`` needs at the top: it starts every sandboxed server (json and typing cost ~50 ms here).
import ctypes
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

HIDE_ENV = "MCPFLEET_SANDBOX_HIDE"  # more folders to hide (os.pathsep-separated): the run's task packs, its output
OFF_ENV = "MCPFLEET_SANDBOX"  # "off": hide nothing
# Never covered, whatever a caller or the environment says: the system the processes need.
NEVER = frozenset("/ /bin /boot /dev /etc /lib /lib32 /lib64 /proc /run /sbin /sys /usr /var".split())

_CLONE_NEWNS, _CLONE_NEWNET = 0x00020000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18

HELPER = "mcpfleet-sandbox-exec"  # servers/bridge/bin/ (scripts/setup.sh) or on PATH (the runner image)

_roots: list[Callable[[], Path | list[Path] | None]] = []
_available: bool | None = None
_helper: list[str | None] = []  # the helper's path once looked up (None: not found), so once per process


class Plan:
    """Absolute, resolved paths: ``hide`` each under an empty read-only tmpfs, ``scratch`` each under an empty
    writable one (the temp folder, /dev/shm), ``keep`` bound back at their own paths inside those."""

    __slots__ = ("hide", "keep", "scratch")
    KINDS = ("hide", "scratch", "keep")

    def __init__(self, hide: tuple[str, ...], scratch: tuple[str, ...], keep: tuple[str, ...]) -> None:
        self.hide, self.scratch, self.keep = hide, scratch, keep

    def __repr__(self) -> str:
        return f"Plan(hide={self.hide}, scratch={self.scratch}, keep={self.keep})"

    def args(self) -> list[str]:
        """``--hide P --scratch P --keep P ...``, what ``main`` reads back."""
        return [a for kind in self.KINDS for path in getattr(self, kind) for a in (f"--{kind}", path)]

    def preexec(self, user: tuple[int, int] | None = None, *, own_network: bool = False) -> Callable[[], None]:
        return preexec(self, user, own_network=own_network)

    @classmethod
    def from_args(cls, args: list[str]) -> tuple[Plan, list[str]]:
        """The plan from ``args`` up to ``--``, and the command after it."""
        found: dict[str, list[str]] = {kind: [] for kind in cls.KINDS}
        i = 0
        while args[i] != "--":
            found[args[i][2:]].append(args[i + 1])
            i += 2
        return cls(*(tuple(found[kind]) for kind in cls.KINDS)), args[i + 1 :]


def register_root(root: Callable[[], Path | list[Path] | None]) -> None:
    """A folder every sandbox hides (asked when a plan is made): e.g. where the run's clusters live; or a list of
    folders, asked anew for each plan (the runs of an output folder, which grow)."""
    _roots.append(root)


def default_hidden() -> list[Path]:
    from pathlib import Path

    from mcpfleet.runner._util.cachedir import cache_dir, viewer_cache_dir

    out = [cache_dir(), viewer_cache_dir(), Path(__file__).resolve().parents[2] / "tasks"]
    out += [Path(p) for p in os.environ.get(HIDE_ENV, "").split(os.pathsep) if p.strip()]
    for root in _roots:
        try:
            if (path := root()) is not None:
                out += path if isinstance(path, list) else [path]
        except Exception:  # noqa: BLE001, S112 - a registered root that cannot say where it is hides nothing
            continue
    return out


def default_scratch() -> list[Path]:
    """Where any process may write: the temp folder, /dev/shm and /var/tmp, each a fresh one inside, so nothing the
    sandboxed processes leave there outlives them (a file read by the next trial: issue 48)."""
    import tempfile
    from pathlib import Path

    return [Path(tempfile.gettempdir()), Path("/dev/shm"), Path("/var/tmp")]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def reset() -> None:
    """Forget ``available``'s and ``helper``'s answers (tests that turn the sandbox off and on)."""
    global _available
    _available = None
    _helper.clear()


def available() -> bool:
    """Root, and unshare works here (a container may forbid it): probed once per process."""
    global _available
    if _available is None:
        _available = _probe()
    return _available


def _probe() -> bool:
    import logging
    import shutil
    import subprocess

    if os.environ.get(OFF_ENV, "").lower() in ("off", "0", "no", "false"):
        return False
    why = None
    if not shutil.which("unshare"):
        why = "no unshare command"
    else:
        # What ``command`` runs, and (not root) a user namespace in which a tmpfs can be mounted: ``preexec``'s way.
        probe = [*_unshare_flags(), "true"]
        if os.geteuid() != 0:
            probe = [*_unshare_flags(), "mount", "-t", "tmpfs", "mcpfleet-probe", "/mnt"]
        p = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            user = "" if os.geteuid() == 0 else " (not root: unprivileged user namespaces may be disabled here)"
            why = f"unshare failed{user}: {p.stderr.strip()[:200]}"
    if why is not None:
        logging.getLogger(__name__).warning(
            "trial servers are not sandboxed (%s): an agent that can read files through its server (a trial "
            "cluster's COPY ... PROGRAM, a browser's file URLs) can read the task packs and the run's output",
            why,
        )
        return False
    return True


def plan(keep: Iterable[Path], hide: Iterable[Path] = (), *, own_pids: bool = False) -> Plan | None:
    """What a sandbox for a process that needs ``keep`` covers, or None when nothing can be (``available``).
    ``own_pids``: the caller enters it with ``command`` (a pid namespace of its own), the only way when not root."""
    if not available() or (os.geteuid() != 0 and not own_pids):
        return None
    # ``command`` without the helper runs this file with this Python. With it, they need not stay visible (the
    # helper is running before it covers anything), but they stay: a plan does not know which way it is entered,
    # and a declared Python server may run on this interpreter (its standard library is under base_prefix).
    own: list[str | Path] = [__file__, sys.executable, sys.base_prefix]
    keeps = sorted({os.path.realpath(p) for p in [*keep, *own] if os.path.exists(p)})
    wanted: dict[str, bool] = {}  # path -> writable
    for paths, writable in ((list(hide) + default_hidden(), False), (default_scratch(), True)):
        for p in paths:
            real = os.path.realpath(p)
            if real in NEVER or not os.path.isdir(real) or any(_under(real, k) for k in keeps):
                continue
            wanted[real] = wanted.get(real, False) or writable
    outer = [p for p in sorted(wanted) if not any(q != p and _under(p, q) for q in wanted)]
    kept = [k for k in keeps if any(_under(k, h) for h in outer)]
    return Plan(tuple(p for p in outer if not wanted[p]), tuple(p for p in outer if wanted[p]), tuple(kept))


def _between(keep: str, covered: list[str]) -> list[str]:
    """The folders strictly between the covering folder of ``keep`` and ``keep``, outermost first."""
    root = next(c for c in covered if _under(keep, c))
    parts = os.path.relpath(keep, root).split(os.sep)[:-1]
    return [os.path.join(root, *parts[: i + 1]) for i in range(len(parts))]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _in_user_namespace() -> bool:
    """Whether this process's ids are a mapped subset (a user namespace below the machine's): then a tmpfs cannot
    be given an owner the namespace does not map, and a folder cannot be handed to one."""
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() != ["0", "0", "4294967295"]
    except OSError:
        return False


def apply(p: Plan, unshare: bool = True) -> None:
    """In the process about to exec the server (a child): a new mount namespace unless already in one, then the
    plan's mounts. Nothing here reaches the caller's namespace (every mount is private)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if unshare:
        _check(libc.unshare(_CLONE_NEWNS), "unshare")
    owners = not _in_user_namespace()
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
    fds = {k: os.open(k, os.O_PATH) for k in p.keep}  # still reachable once their parents are covered
    covered = [*p.hide, *p.scratch]
    # Each covering folder, and each folder made inside it on the way to what is kept, gets the owner and mode of
    # the one it stands for: who could not list or enter it still cannot.
    like = {d: os.stat(d) for k in p.keep for d in _between(k, covered)}
    try:
        for path in covered:
            st = os.stat(path)
            owner = f",uid={st.st_uid},gid={st.st_gid}" if owners else ""  # (else the mounting user's)
            opts = f"mode={st.st_mode & 0o7777:o}{owner}".encode()
            _check(libc.mount(b"mcpfleet-hidden", path.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts), path)
        for k, fd in fds.items():
            for d in _between(k, covered):
                if not os.path.lexists(d):
                    os.mkdir(d)
                    if owners:
                        os.chown(d, like[d].st_uid, like[d].st_gid)
                    os.chmod(d, like[d].st_mode & 0o7777)
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                if not os.path.lexists(k):
                    os.mkdir(k, 0o700)
            else:
                os.close(os.open(k, os.O_CREAT | os.O_WRONLY, 0o600))
            _check(libc.mount(f"/proc/self/fd/{fd}".encode(), k.encode(), None, _MS_BIND | _MS_REC, None), f"keep {k}")
        for h in p.hide:
            flags = _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
            _check(libc.mount(None, h.encode(), None, flags, None), f"read-only {h}")
    finally:
        for fd in fds.values():
            os.close(fd)


def own_network_available() -> bool:
    """Whether ``preexec(..., own_network=True)`` can work here: root (a network namespace and a /proc of its own
    need it), a working sandbox, and a kernel whose /proc mounts each keep their own options (5.8: before it, a
    ``hidepid`` mount changed every /proc of the pid namespace, the machine's own included)."""
    if os.geteuid() != 0 or not available():
        return False
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 8)


def _own_network_and_processes() -> None:
    """In the child, after ``apply``: a network namespace of its own (only a loopback, down: nothing on the
    machine's loopback or beyond is reachable), and a /proc that shows other users' processes to nobody but root
    (``hidepid=invisible``: command lines, environments and open files of the run's processes)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _check(libc.unshare(_CLONE_NEWNET), "unshare the network")
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(libc.mount(b"proc", b"/proc", b"proc", flags, b"hidepid=invisible"), "a private /proc")


def preexec(p: Plan, user: tuple[int, int] | None = None, *, own_network: bool = False) -> Callable[[], None]:
    """A ``preexec_fn`` part: ``apply``, then (as ``Popen(user=, group=, extra_groups=[])`` would, which runs
    before ``preexec_fn``: too early) switch to ``user``. Call it first; a parent-death signal after it.
    ``own_network`` (see ``own_network_available``): no network but its own, no view of other users' processes."""

    def enter() -> None:
        apply(p)
        if own_network:
            _own_network_and_processes()
        if user is not None:
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])

    return enter


def _unshare_flags() -> list[str]:
    flags = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:  # root in a user namespace of its own (the run's user outside): it may mount there
        flags[1:1] = ["--user", "--map-root-user"]
    return flags


def helper() -> str | None:
    """``mcpfleet-sandbox-exec`` (``main`` in C, without Python's start-up), built next to the pinned servers
    (servers/bridge/bin) or on PATH; None when neither has it (then ``command`` runs ``main``)."""
    if not _helper:
        import shutil

        from mcpfleet.runner.environment.server import servers_root

        built = servers_root() / "bridge" / "bin" / HELPER
        found = str(built) if os.access(built, os.X_OK) and built.is_file() else shutil.which(HELPER)
        _helper.append(found)
    return _helper[0]


def command(argv: list[str], p: Plan) -> list[str]:
    """``argv`` run in a sandbox of its own, pid namespace and /proc included: ``unshare`` forks it as pid 1 of the
    new namespace (when it ends, whatever it started there is killed), and kills it if ``unshare`` is killed.
    In there, ``helper`` (or this module's ``main`` without it) makes the mounts and execs ``argv``."""
    if (exe := helper()) is not None:
        return [*_unshare_flags(), "--", exe, *p.args(), "--", *argv]
    me = os.path.realpath(__file__)
    return [*_unshare_flags(), "--", sys.executable, "-I", "-S", me, *p.args(), "--", *argv]


def main(args: list[str]) -> None:
    """``command``'s second half, in the new namespaces: the mounts, then exec."""
    if "--" not in args or args[-1] == "--":
        sys.exit("usage: sandbox.py [--hide|--scratch|--keep PATH]... -- COMMAND [ARG...]")
    p, argv = Plan.from_args(args)
    apply(p, unshare=False)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
