"""The verifier's invocation as a trial's record shows it (pure): what a reader can re-run, never a secret.

A record is read far from the process that ran the trial (another machine, a pod long gone), so its paths are
written as placeholders that mean the same everywhere (``{task}``: the task's folder in its pack, ``{state}``:
the trial's state folder, ``{trial}``: the trial's own folder, whose ``messages.json`` is the record's), the
interpreter as ``python`` (MCPMark's ``python verify.py``). The variables are the service's (what MCPMark's
contract hands a verifier), not the runner's PATH, TZ, LANG or private HOME and TMPDIR. A value is never
recorded when its variable's name says it holds a secret (a password, a token, a key), and a secret-named
variable's value is also taken out wherever it recurs (a DSN holding the password); a URL's password is taken
out whatever its variable is called.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SECRET = "[secret]"
# A variable whose name holds one of these words carries a secret (POSTGRES_PASSWORD, PGPASSWORD, API_KEY, ...).
SECRET_NAME = re.compile(r"PASS|SECRET|TOKEN|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT", re.IGNORECASE)
# scheme://user:password@host: the password part.
URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@/\s]+)(?=@)")
MIN_SECRET_CHARS = 4  # a shorter value (a dummy "x") recurring elsewhere is no secret worth breaking text for


def secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _placed(text: str, places: Sequence[tuple[str, str]]) -> str:
    for path, token in places:
        text = text.replace(path, token)
    return text


def shown_invocation(
    script: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    places: Mapping[str, Path | str],
) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` of a verifier run as ``python script *args`` with ``env`` (the service's variables), for
    the record: each path of ``places`` (placeholder -> path) written as its placeholder (the longest path first,
    so a state folder inside the trial's folder reads ``{state}``), secrets out (see the module's docstring)."""
    paths = []
    for token, path in places.items():
        for form in {str(path), str(Path(path).resolve())}:
            if form and form != "/":
                paths.append((form, token))
    paths.sort(key=lambda p: -len(p[0]))
    hidden = [v for k, v in env.items() if secret_name(k) and len(v) >= MIN_SECRET_CHARS]
    hidden.sort(key=len, reverse=True)

    def clean(text: str) -> str:
        text = URL_PASSWORD.sub(lambda m: m.group("head") + SECRET, text)
        for value in hidden:
            text = text.replace(value, SECRET)
        return _placed(text, paths)

    argv = ["python", _placed(str(script), paths), *(clean(a) for a in args)]
    shown = {k: SECRET if secret_name(k) else clean(v) for k, v in sorted(env.items())}
    return argv, shown


_PLAIN = re.compile(r"[\w@%+=:,./{}\[\]-]+")


def command_line(argv: Sequence[str]) -> str:
    """A recorded argv as one shell line: words quoted only when a shell would split or expand them (the
    placeholders stay readable)."""
    return " ".join(a if _PLAIN.fullmatch(a) else shlex.quote(a) for a in argv)


def recorded_verifier(rec: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The record's verifier and its command as one line ("" when it names none: no verifier ran, or an older
    record); a damaged field is shown as absent, never as a crash."""
    v = rec.get("verifier")
    v = dict(v) if isinstance(v, dict) else {}
    command = v.get("command")
    ok = isinstance(command, list) and all(isinstance(a, str) for a in command)
    env = v.get("env")
    if not (isinstance(env, dict) and all(isinstance(x, str) for x in env.values())):
        v["env"] = {}
    return v, command_line(command) if ok and command else ""
