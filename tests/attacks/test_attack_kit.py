"""Issue 48 §5: the attack kit. Scripted hostile agents (``scripted/script=<file>`` turns of tool calls, one script
per attack in ``scripts/``) run through the real `mcpfleet run`, one EvalRun per group of attacks; each case then
reads only what the run recorded, the canary listeners and the host, and asserts BLOCKED: the attack's effect did
not happen. README.md in this folder: the table of attacks, how to add one, how to run only the kit."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from attack_catalog import ATTACKS, CANARY_KEY_CHECK, GROUPS, Attack  # noqa: E402
from attack_kit import Trial, shared_folder, shared_run, trial_of  # noqa: E402
from attack_packs import VERIFY_MARK  # noqa: E402

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="superuser trials are refused unless run as root"),
    # A case waits for its group's run (its own, or another worker's): minutes on a loaded machine, not a hang.
    pytest.mark.timeout(900),
]
CANARY_KEY = "sk-attack-canary-" + uuid.uuid4().hex[:16]


def group_run(group: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The group's one `mcpfleet run` in this session (whichever worker comes first runs it)."""

    def servers() -> tuple[str, dict[str, str]]:
        ctx = {"CANARY_KEY": CANARY_KEY, "VERIFY_MARK": VERIFY_MARK, "S3_PORT": "0"}
        if group == "pg-cluster":  # an S3 endpoint on loopback, for the superuser's shell to aim at
            ctx["S3_PORT"] = request.getfixturevalue("s3_endpoint").rsplit(":", 1)[1]
        return request.getfixturevalue("scripted_url"), ctx

    attacks = {a.name: a.name for a in ATTACKS if a.group == group}
    basetemp = request.getfixturevalue("tmp_path_factory").getbasetemp()
    return shared_run(shared_folder(basetemp), GROUPS[group], attacks, servers)


def control_of(run: dict[str, Any], group: str) -> Trial | None:
    name = f"control-{group}"
    if name not in run["trials"]:
        return None
    rec = run["trials"][name]
    return Trial(name, rec["result"], rec["files"], {}, run["host"], {})


CASES = [
    pytest.param(a, id=a.name, marks=[pytest.mark.xfail(strict=True, reason=a.gap)] if a.gap else []) for a in ATTACKS
]


@pytest.mark.parametrize("attack", CASES)
def test_attack(attack: Attack, request: pytest.FixtureRequest) -> None:
    run = group_run(attack.group, request)
    trial = trial_of(run, attack.name)
    calls = [c for turn in trial.result.get("turns") or [] for c in turn.get("tool_calls") or []]
    assert calls, f"{attack.name}: the attack never ran (no tool call recorded)\n{trial.outcome()}"
    assert trial.result.get("failure") not in ("infra_error", "config_error"), trial.outcome()
    leaks = [
        leak for check in (*attack.checks, CANARY_KEY_CHECK) for leak in check(trial, control_of(run, attack.group))
    ]
    assert not leaks, f"{attack.name} GOT THROUGH: {leaks}\n{trial.outcome()}"


@pytest.mark.parametrize("group", [g for g in GROUPS if f"control-{g}" in {c["name"] for c in GROUPS[g].controls}])
def test_the_honest_control_passes(group: str, request: pytest.FixtureRequest) -> None:
    """The group's task can be passed (so a failed attack trial means graded on the real state) and its verifier
    reports what an untouched trial sees."""
    control = control_of(group_run(group, request), group)
    assert control is not None and control.result["passed"], control.outcome() if control else "no control trial"
    assert control.report, control.outcome()


def test_the_readme_lists_every_attack() -> None:
    """The README's table is ``attacks.readme_table()``: every attack, its probe class and what BLOCKED means."""
    from attack_catalog import readme_table

    text = (Path(__file__).with_name("README.md")).read_text()
    table = text.split("<!-- attack-table -->\n", 1)[1].split("<!-- end-attack-table -->", 1)[0]
    assert table == readme_table(), "README.md's table of attacks is stale: regenerate it (README.md says how)"
    scripts = {p.stem for p in (Path(__file__).parent / "scripts").glob("*.json")}
    assert scripts == {a.name for a in ATTACKS}, "every script is an attack and every attack has a script"
