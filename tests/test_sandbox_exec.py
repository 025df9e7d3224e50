"""``mcpfleet-sandbox-exec`` (servers/bridge/sandbox-exec.c), the C port of ``sandbox.main``, enters the same sandbox
as the Python way: the same mounts with the same options, the same folders made between a covering folder and what
is kept (owner and mode), the same view from inside. A failing step is named and stops it before the command runs.
``sandbox.command`` uses the helper when it is built, and Python when it is not."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpfleet.runner.environment import sandbox

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "servers" / "bridge" / "sandbox-exec.c"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root sandboxes trial servers")


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's source, built as setup.sh and the runner image build it, warnings refused."""
    if shutil.which("gcc") is None:  # scripts/setup.sh installs it (the bridge helpers are built with it)
        pytest.fail("no gcc to build servers/bridge/sandbox-exec.c: run scripts/setup.sh")
    out = tmp_path_factory.mktemp("sbx-exec") / sandbox.HELPER
    build = ["gcc", "-static", "-O2", "-s", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(SOURCE)]
    p = subprocess.run(build, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return out


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(sandbox.OFF_ENV, "on")
    sandbox.reset()
    if not sandbox.available():
        pytest.fail("root, but unshare does not work here: the sandbox tests need it")
    yield
    sandbox.reset()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Folders to hide and cover, with keeps under them behind folders of unusual modes and owners."""
    b = tmp_path / "b"
    layout: list[tuple[str, int, int]] = [  # path, mode, owner (uid = gid)
        ("h1", 0o755, 0),
        ("h1/inner", 0o755, 0),
        ("h1/a", 0o711, 1234),
        ("h1/a/b", 0o750, 65534),
        ("h1/a/b/keepdir", 0o700, 0),
        ("h2", 0o700, 4321),
        ("s", 0o1777, 0),
        ("s/k", 0o2750, 1234),
        ("s/k/inner", 0o755, 0),
    ]
    for rel, mode, owner in layout:
        d = b / rel
        d.mkdir(parents=True)
        os.chown(d, owner, owner)
        d.chmod(mode)
    (b / "h1" / "secret.txt").write_text("the answer key\n")
    (b / "h2" / "secret.txt").write_text("the answer key\n")
    (b / "h1" / "file.txt").write_text("kept file\n")
    (b / "h1" / "a" / "b" / "keepdir" / "f.txt").write_text("kept folder\n")
    (b / "s" / "k" / "inner" / "g.txt").write_text("kept under a scratch\n")
    (b / "s" / "old.txt").write_text("left by another trial\n")
    return b


PROBED = "h1 h1/a h1/a/b h1/a/b/keepdir h1/file.txt h2 s s/k s/k/inner".split()


def probe(b: Path) -> str:
    """A shell script: the mount table, then what a process inside sees and can do."""
    stats = " ".join(str(b / p) for p in PROBED)
    return (
        "cat /proc/self/mountinfo; echo ==; "
        f"stat -c '%n %a %u %g %F' {stats} 2>&1; echo ==; "
        f"for d in h1 h1/a h1/a/b h2 s s/k; do echo $d:; ls -A {b}/$d 2>&1; done; echo ==; "
        f"cat {b}/h1/secret.txt {b}/h2/secret.txt 2>&1; "
        f"cat {b}/h1/a/b/keepdir/f.txt {b}/h1/file.txt {b}/s/k/inner/g.txt 2>&1; "
        f"echo written > {b}/s/new.txt && cat {b}/s/new.txt; "
        f"touch {b}/h1/new.txt 2>&1; touch {b}/h1/a/new.txt 2>&1; true"
    )


def normalised(out: str) -> str:
    """Mount ids and device numbers vary from one namespace to the next: the rest of each mountinfo line stays."""
    table, _, rest = out.partition("==\n")
    lines = [
        re.sub(r"\b(shared|master|propagate_from):\d+", r"\1:N", line.split(" ", 3)[3]) for line in table.splitlines()
    ]
    return "\n".join(lines) + "\n==\n" + rest


def run(
    way: Path | None, p: sandbox.Plan, argv: list[str], monkeypatch: pytest.MonkeyPatch, userns: bool = False
) -> subprocess.CompletedProcess[str]:
    """``argv`` through ``sandbox.command`` with the helper ``way`` (None: the Python way)."""
    monkeypatch.setattr(sandbox, "helper", lambda: None if way is None else str(way))
    cmd = sandbox.command(argv, p)
    assert (
        (cmd[cmd.index("--") + 1] == str(way))
        if way
        else (os.path.realpath(sandbox.__file__) in cmd[cmd.index("--") + 1 :][:4])
    )
    if userns:  # the way a run that is not root enters it: ids mapped, no owners given to tmpfs or folders
        cmd[1:1] = ["--user", "--map-root-user"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def plans(b: Path) -> dict[str, sandbox.Plan]:
    keeps = (str(b / "h1/a/b/keepdir"), str(b / "h1/file.txt"), str(b / "s/k/inner"))
    made = sandbox.plan([Path(k) for k in keeps], [b / "h1", b / "h1/inner", b / "h2"], own_pids=True)
    assert made is not None
    return {
        "plan(): nested hides in the temp folder, the defaults": made,
        "hides, a scratch, keeps under both": sandbox.Plan((str(b / "h1"), str(b / "h2")), (str(b / "s"),), keeps),
        "a kept file right under a hide": sandbox.Plan((str(b / "h1"),), (), (str(b / "h1/file.txt"),)),
        "only a scratch": sandbox.Plan((), (str(b / "s"),), ()),
    }


@pytest.mark.parametrize(
    "name",
    [
        "hides, a scratch, keeps under both",
        "a kept file right under a hide",
        "plan(): nested hides in the temp folder, the defaults",
    ],
)
def test_the_helper_and_python_enter_the_same_sandbox(
    name: str, tree: Path, helper: Path, on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = plans(tree)[name]
    argv = ["sh", "-c", probe(tree)]
    python = run(None, p, argv, monkeypatch)
    (tree / "s" / "new.txt").unlink(missing_ok=True)  # written outside when the plan does not cover s
    c = run(helper, p, argv, monkeypatch)
    assert python.returncode == 0 and c.returncode == 0, (python.stderr, c.stderr)
    assert normalised(c.stdout) == normalised(python.stdout)
    assert c.stderr == python.stderr == ""
    seen = c.stdout
    assert f"cat: {tree}/h1/secret.txt: No such file or directory" in seen and "kept file" in seen  # h1 is empty
    if not name.startswith("a kept file"):
        assert "the answer key" not in seen and "kept folder" in seen
    if name.startswith("plan()"):  # everything under the temp folder: a scratch, /dev/shm and /var/tmp too
        assert f"/ {tree.parents[2]} " not in seen and " /tmp rw,nosuid,nodev,relatime - tmpfs mcpfleet-hidden" in seen
        assert f"{tree / 'h1/a'} 711 1234 1234 directory" in seen and f"'{tree / 'h2'}': No such file" in seen
    else:
        assert f"touch: cannot touch '{tree}/h1/new.txt': Read-only file system" in seen
        assert " - tmpfs mcpfleet-hidden ro," in seen
    if name.startswith("hides"):
        assert "kept under a scratch" in seen and "written" in seen
        assert "left by another trial" not in seen  # a scratch is a fresh one
        # the folders made on the way to what is kept: their originals' modes and owners
        for rel, want in (("h1/a", "711 1234 1234"), ("h1/a/b", "750 65534 65534"), ("s/k", "2750 1234 1234")):
            assert f"{tree / rel} {want} directory" in seen, seen
        assert f"{tree / 'h2'} 700 4321 4321 directory" in seen  # a tmpfs with the owner of what it covers
        assert "mode=700,uid=4321,gid=4321" in seen


def test_the_same_sandbox_in_a_user_namespace(
    tree: Path, helper: Path, on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not root: a tmpfs or a made folder cannot be given an owner the namespace does not map, so neither way gives
    one (``_in_user_namespace``)."""
    p = plans(tree)["a kept file right under a hide"]
    argv = ["sh", "-c", f"cat /proc/self/mountinfo; echo ==; cat {tree}/h1/file.txt; ls -A {tree}/h1"]
    python, c = (run(way, p, argv, monkeypatch, userns=True) for way in (None, helper))
    assert python.returncode == 0 and c.returncode == 0, (python.stderr, c.stderr)
    assert normalised(c.stdout) == normalised(python.stdout)
    assert "tmpfs mcpfleet-hidden ro,mode=755\n" in c.stdout and ",uid=" not in c.stdout, c.stdout
    assert c.stdout.endswith("==\nkept file\nfile.txt\n")


@pytest.mark.parametrize(
    ("case", "step"),
    [
        ("a keep that does not exist", "open the kept {b}/h1/missing: No such file or directory"),
        ("a hide that is a file", "cover {b}/h1/file.txt: Not a directory"),
        ("a keep under nothing covered", "find the covered folder holding the kept {b}/s/k: Invalid argument"),
    ],
)
def test_a_failing_step_is_named_and_the_command_not_run(
    case: str, step: str, tree: Path, helper: Path, on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = tree
    p = {
        "a keep that does not exist": sandbox.Plan((str(b / "h1"),), (), (str(b / "h1/missing"),)),
        "a hide that is a file": sandbox.Plan((str(b / "h1/file.txt"),), (), ()),
        "a keep under nothing covered": sandbox.Plan((str(b / "h1"),), (), (str(b / "s/k"),)),
    }[case]
    ran = b / "ran"
    argv = ["sh", "-c", f"echo ran > {ran}"]
    c = run(helper, p, argv, monkeypatch)
    assert (c.returncode, c.stderr) == (127, f"{sandbox.HELPER}: {step.format(b=b)}\n")
    assert not ran.exists()
    python = run(None, p, argv, monkeypatch)  # the reference fails at the same step, in its way
    assert python.returncode != 0 and not ran.exists()


def test_a_usage_error(helper: Path) -> None:
    for args in ([], ["--hide", "/x"], ["--hide", "/x", "--"], ["--hid", "/x", "--", "true"], ["--keep"]):
        p = subprocess.run([str(helper), *args], capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and p.stderr.startswith(f"{sandbox.HELPER}: ") and "usage:" in p.stderr, args


def test_command_uses_the_helper_when_built_and_python_when_not(
    tmp_path: Path, helper: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = sandbox.Plan(("/h",), ("/s",), ("/h/k",))
    plan_args = ["--hide", "/h", "--scratch", "/s", "--keep", "/h/k", "--", "srv", "-x"]
    servers = tmp_path / "servers"
    monkeypatch.setenv("MCPFLEET_SERVERS_DIR", str(servers))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    sandbox.reset()
    cmd = sandbox.command(["srv", "-x"], p)
    assert cmd[cmd.index("--") + 1 :] == [sys.executable, "-I", "-S", os.path.realpath(sandbox.__file__), *plan_args]
    on_path = tmp_path / "path"
    on_path.mkdir()
    shutil.copy(helper, on_path / sandbox.HELPER)
    monkeypatch.setenv("PATH", str(on_path))
    sandbox.reset()  # (looked up once per process)
    assert sandbox.command(["srv", "-x"], p)[-len(plan_args) - 1 :] == [str(on_path / sandbox.HELPER), *plan_args]
    built = servers / "bridge" / "bin" / sandbox.HELPER
    built.parent.mkdir(parents=True)
    shutil.copy(helper, built)
    sandbox.reset()
    cmd = sandbox.command(["srv", "-x"], p)
    assert cmd[: cmd.index("--")] == sandbox._unshare_flags() and cmd[cmd.index("--") + 1 :] == [str(built), *plan_args]
    sandbox.reset()


def test_the_helper_is_a_static_binary(helper: Path) -> None:
    """No ELF interpreter (PT_INTERP): ``unshare`` execs it wherever the runner runs, whatever libc is there."""
    data = helper.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2  # 64-bit
    phoff, phentsize, phnum = struct.unpack_from("<Q", data, 0x20)[0], *struct.unpack_from("<HH", data, 0x36)
    types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    assert 1 in types and 3 not in types, f"{sandbox.HELPER} has an ELF interpreter: it is not static"
