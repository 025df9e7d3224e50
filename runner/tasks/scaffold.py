"""``mcpfleet tasks new``: a task folder to fill in, in MCPMark's layout, that ``tasks validate`` accepts once filled.

Until it is filled in, ``tasks validate`` refuses it and says what is missing: the verifier is a stub that fails
(so the oracle does not pass), and the oracle has no step.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from mcpfleet.runner.spec.task import NAME_RE, TaskError

DESCRIPTION = """\
TODO: say what the agent must do, as a colleague would ask it: the situation, what to change or produce,
where, and the rules that decide what "right" means (MCPMark's tasks run to about 290 words).
"""

VERIFY = '''\
#!/usr/bin/env python3
"""Verifier for {category}/{name}: exit 0 when the end state is right, else print each failed check and exit 1.

Recompute the expected end state from the untouched initial state (``STATE``), then check the whole end state:
everything that should have changed did, and nothing else did (plausible wrong answers must fail).
"""

import os
import sys
from pathlib import Path

STATE = Path(__file__).resolve().parents[3] / "states" / "{category}"  # the initial state, untouched
{env_lines}

def fail(msg):
    print(f"FAIL: {{msg}}")
    sys.exit(1)


def main():
    fail("verify.py is the scaffold's stub: write its checks")


if __name__ == "__main__":
    main()
'''


def _env_lines(names: list[str]) -> str:
    if not names:
        return ""
    return "".join(f'{n} = os.environ.get("{n}")  # from service.yaml\'s verifier.env\n' for n in names)


def scaffold(pack: Path, service: str, category: str, name: str, difficulty: str, env: list[str]) -> Path:
    """Write ``<pack>/<service>/<difficulty>/<category>/<name>/``; TaskError if a part is no name or it exists.
    ``env``: the variables the service's verifier gets (written into the stub)."""
    for what, part in (("service", service), ("category", category), ("task", name), ("difficulty", difficulty)):
        if not NAME_RE.fullmatch(part):
            raise TaskError(f"{what} '{part}' must match {NAME_RE.pattern} (it becomes part of trial ids)")
    folder = pack / service / difficulty / category / name
    if folder.exists():
        raise TaskError(f"{folder} exists already; choose another task name")
    folder.mkdir(parents=True)
    (folder / "description.md").write_text(DESCRIPTION)
    meta = {
        "task_id": name,
        "task_name": name.replace("_", " ").title(),
        "category_id": category,
        "category_name": category.replace("_", " ").title(),
        "description": "TODO: one sentence",
        "author": "TODO",
        "created_at": dt.date.today().isoformat(),
        "difficulty": "L3",
        "tags": [],
        "mcp": [service],
        "meta_data": {"stateType": "text", "stateContent": "", "stateUrl": ""},
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    verify = folder / "verify.py"
    verify.write_text(VERIFY.format(category=category, name=name, env_lines=_env_lines(env)))
    verify.chmod(0o755)
    (folder / "oracle.json").write_text(json.dumps({"steps": []}, indent=2) + "\n")
    return folder
