"""A service declared as data: ``<pack>/<service>/service.yaml``, and the EvalRun's server variants.

The server block has the ``mcpServers`` shape MCP clients use (Claude Desktop, VS Code): ``command``/``args``/
``env`` for a stdio server, or ``url`` for a streamable-HTTP server that is already running; ``image`` is what a
trial pod runs. ``{state}`` in the server's args and env and in ``verifier.env`` is the trial's own copy of its
state; ``{port:NAME}`` is the port of its backing service NAME. These models are the single source of truth for
the file's keys: ``mcpfleet tasks validate`` and the run's preflight refuse unknown keys with the file's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from mcpfleet.runner.spec.specmodel import SpecModel
from mcpfleet.runner.spec.task import TaskError

DECLARATION_FILE = "service.yaml"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
STATE_TOKEN = "{state}"
PORT_TOKEN = re.compile(r"\{port:([^{}]*)\}")
MAX_DECLARATION_BYTES = 256 * 1024
MAX_VARIANTS = 20


class StateKind(StrEnum):
    folder = "folder"  # <states>/<category>/ copied fresh per trial, file times kept
    none = "none"  # no state: the trial's folder is empty


class ServerBlock(SpecModel):
    """How a trial's MCP server starts: stdio (``command``) or an already running streamable-HTTP one (``url``)."""

    command: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A stdio server: a name on PATH (or in mcpfleet's pinned servers), or a path relative to the file.",
    )
    args: list[str] = Field(default_factory=list, max_length=256)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = Field(
        default=None, max_length=2048, description="A streamable-HTTP server that is already running."
    )
    image: str | None = Field(default=None, max_length=1024, description="The image a trial pod runs the server in.")
    warm_start: bool = Field(
        default=False,
        description=(
            "The server reads its state only when a tool is called, never at start: a worker may then start the "
            "next trial's server while the current trial runs, and copy the state in when that trial begins "
            "(what the bundled filesystem service does). Leave false for a server that opens its state at start."
        ),
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"'{v}' is not an http(s):// URL of a streamable-HTTP MCP endpoint")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"'{name}' is not an environment variable name")
        return v


class StateBlock(SpecModel):
    kind: StateKind = StateKind.folder


class VerifierBlock(SpecModel):
    env: dict[str, str] = Field(default_factory=dict, description="What verify.py gets, besides MCP_MESSAGES.")


class Readiness(SpecModel):
    """When a backing service is ready: an HTTP GET of ``httpGet`` answering below 500, or a TCP connect."""

    http_get: str | None = Field(default=None, max_length=1024)
    tcp: bool | None = None

    @model_validator(mode="after")
    def _one(self) -> Readiness:
        if (self.http_get is None) == (not self.tcp):
            raise ValueError("give exactly one of httpGet: /path or tcp: true")
        if self.http_get is not None and not self.http_get.startswith("/"):
            raise ValueError(f"httpGet '{self.http_get}' must be a path starting with /")
        return self


class Backing(SpecModel):
    """A backing service of the trial (a web app a browser server drives, a database a server fronts), started
    fresh per trial before the MCP server and stopped after the verifier; a native sidecar in a pod."""

    name: str = Field(pattern=DNS_LABEL, max_length=40)
    command: list[str] | None = Field(
        default=None, min_length=1, description="argv; {port:NAME} and {state} are substituted."
    )
    image: str | None = Field(default=None, max_length=1024)
    port: int | None = Field(
        default=None, ge=1, le=65535, description="A fixed port; unset: a free one is chosen per trial."
    )
    env: dict[str, str] = Field(default_factory=dict)
    readiness: Readiness

    @model_validator(mode="after")
    def _runnable(self) -> Backing:
        if self.command is None and self.image is None:
            raise ValueError(f"backing service '{self.name}' needs a command (locally) or an image (in pods)")
        return self


class ServiceDeclaration(SpecModel):
    """``<pack>/<service>/service.yaml``."""

    server: ServerBlock
    state: StateBlock = Field(default_factory=StateBlock)
    verifier: VerifierBlock = Field(default_factory=VerifierBlock)
    refused_tools: list[str] = Field(default_factory=list, description="Tools no agent may call.")
    prompt: str | None = Field(
        default=None, max_length=16_384, description="Appended to every task's description, as sent to the model."
    )
    backing: list[Backing] = Field(default_factory=list, max_length=8)

    @model_validator(mode="after")
    def _coherent(self) -> ServiceDeclaration:
        server = self.server
        if (server.command is None) == (server.url is None):
            raise ValueError("server: give exactly one of command (a stdio server) or url (a streamable-HTTP one)")
        if server.url is not None and (server.args or server.env):
            raise ValueError("server: args and env belong to a stdio server (command), not to a url")
        names = [b.name for b in self.backing]
        if len(set(names)) != len(names):
            raise ValueError(f"backing: names must be unique; given {names}")
        if self.state.kind == StateKind.none:
            for where, text in self.templated():
                if STATE_TOKEN in text:
                    raise ValueError(f"{where} uses {STATE_TOKEN} but state.kind is none: there is no state folder")
        for where, text in self.templated():
            for port in PORT_TOKEN.findall(text):
                if port not in names:
                    known = ", ".join(names) or "none declared"
                    raise ValueError(f"{where} names {{port:{port}}}, which is no backing service (backing: {known})")
        return self

    def templated(self) -> list[tuple[str, str]]:
        """Every (key, text) in which ``{state}`` and ``{port:NAME}`` are substituted per trial."""
        out = [(f"server.args[{i}]", a) for i, a in enumerate(self.server.args)]
        out += [(f"server.env.{k}", v) for k, v in self.server.env.items()]
        out += [(f"verifier.env.{k}", v) for k, v in self.verifier.env.items()]
        if self.server.url:
            out.append(("server.url", self.server.url))
        if self.prompt:
            out.append(("prompt", self.prompt))
        for b in self.backing:
            out += [(f"backing[{b.name}].command[{i}]", a) for i, a in enumerate(b.command or [])]
            out += [(f"backing[{b.name}].env.{k}", v) for k, v in b.env.items()]
        return out


class ServerVariant(SpecModel):
    """One entry of ``spec.servers``: a variant of a declared service's server, which becomes a sweep axis.
    Its keys replace those of the pack's ``server`` block; with only ``name`` and ``service`` it is the pack's."""

    name: str = Field(pattern=DNS_LABEL, max_length=40, description="A DNS label; part of trial ids.")
    service: str = Field(min_length=1, max_length=64, description="The declared service whose server it replaces.")
    command: str | None = Field(
        default=None, min_length=1, max_length=4096, description="A name on PATH or a path relative to the EvalRun."
    )
    args: list[str] | None = Field(default=None, max_length=256)
    env: dict[str, str] | None = None
    url: str | None = Field(default=None, max_length=2048)
    image: str | None = Field(default=None, max_length=1024)

    def overrides(self) -> dict[str, Any]:
        """The server keys it sets."""
        return self.model_dump(include={"command", "args", "env", "url", "image"}, exclude_none=True)


def substitute(text: str, state_dir: Path | str, ports: Mapping[str, int | str]) -> str:
    """``{state}`` and ``{port:NAME}`` in one declared value (a port: a number, or in a pod the ``$(VAR)`` that the
    kubelet expands to it)."""
    out = text.replace(STATE_TOKEN, str(state_dir))
    return PORT_TOKEN.sub(lambda m: str(ports[m.group(1)]), out)


class DeclarationError(TaskError):
    """A service.yaml that cannot be used, naming the file, the key and the fix."""


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_declaration(path: Path, data: Any) -> ServiceDeclaration:
    """Validate a loaded service.yaml; every error names the file and the key."""
    if not isinstance(data, dict):
        raise DeclarationError(f"{path}: expected a mapping with a 'server' block (see docs/own-servers.md)")
    try:
        return ServiceDeclaration.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = _where(tuple(err["loc"]))
            if err["type"] == "extra_forbidden":
                problems.append(
                    f"{path}: unknown key '{where}'; remove it or fix its spelling (see docs/own-servers.md)"
                )
            elif err["type"] == "missing":
                problems.append(f"{path}: '{where}' is required")
            else:
                message = str(err["msg"]).removeprefix("Value error, ")
                problems.append(f"{path}: {where}: {message}")
        raise DeclarationError("; ".join(problems)) from None
