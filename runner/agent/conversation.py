"""What the model is shown in the tool-calling loop: MCPMark's conversation or mcpfleet's own.

The loop (agent.py) is the same for both; a ``Conversation`` decides the opening messages, how MCP tools
are offered, how a tool result, a failed call or a timed-out call reads, and how the assistant's message is
kept in the history. ``MCPMARK`` reproduces MCPMark's agent (src/agents/mcpmark_agent.py, LiteLLM path):
system prompt, task suffix, ``json.dumps`` of the MCP SDK 1.x ``CallToolResult.model_dump()`` as the tool
message, the provider's whole message dump kept in the history, arguments parsed strictly (a call whose
arguments are not JSON ends the run, as it does there).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.environment.mcp_client import result_text, tool_to_openai
from mcpfleet.runner.spec import mcpmark_protocol as protocol
from mcpfleet.runner.spec.task import Task

if TYPE_CHECKING:
    from mcpfleet.runner.llm.client import LLMTarget

# MCPMark pins litellm 1.80.0, which sends every Claude model max_tokens=4096 (DEFAULT_ANTHROPIC_CHAT_MAX_TOKENS)
# when the caller sets none, as MCPMark's agents do. Later LiteLLM sends the model's maximum instead (64000 for
# Claude 4.5), which would let a Claude reply run 16 times longer here than under MCPMark.
MCPMARK_ANTHROPIC_MAX_TOKENS = 4096
MCPMARK_LLM_ATTEMPTS = 3  # MCPMark's loop gives up after this many consecutive failed LLM calls


def mcpmark_llm_defaults(model: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """What MCPMark's pinned LiteLLM sends that today's would not: Claude's 4096 output tokens per call when the
    run sets neither ``maxTokens`` nor a reasoning effort (with an effort, MCPMark's native Anthropic path asks
    for the thinking budget + 4096, which today's LiteLLM asks for too)."""
    given = params or {}
    if "max_tokens" in given or "reasoning_effort" in given or not _anthropic(model):
        return {}
    return {"max_tokens": MCPMARK_ANTHROPIC_MAX_TOKENS}


def mcpmark_params(model: str, params: dict[str, Any] | None, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """What MCPMark's agents add to the run's params on every LLM call: ``tool_choice: auto`` when tools are
    offered natively (the ReAct agent offers none), and ``mcpmark_llm_defaults``."""
    return {**({"tool_choice": "auto"} if tools else {}), **mcpmark_llm_defaults(model, params)}


def mcpmark_target(target: LLMTarget, tools: list[dict[str, Any]] | None = None) -> LLMTarget:
    """``target`` as MCPMark's agents call LiteLLM with it (``mcpmark_params`` over its params): the one place
    both the tool-calling loop and the ReAct agent get MCPMark's defaults from, so they cannot drift apart."""
    extra = mcpmark_params(target.model, target.params, tools)
    return dataclasses.replace(target, params={**(target.params or {}), **extra}) if extra else target


def _anthropic(model: str) -> bool:
    import litellm  # loaded already wherever an agent runs

    try:
        return litellm.get_llm_provider(model)[1] == "anthropic"
    except Exception:  # noqa: BLE001 - a model LiteLLM cannot place is no Claude of Anthropic's API
        return False


def _str(value: Any) -> Any:
    return None if value is None else str(value)


def _annotations(a: Any) -> dict[str, Any] | None:
    if a is None:
        return None
    out: dict[str, Any] = {"audience": a.audience, "priority": a.priority}
    if getattr(a, "last_modified", None) is not None:  # not a 1.x field: kept as the wire's extra key
        out["lastModified"] = a.last_modified
    return out


def _resource_contents(r: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"uri": _str(r.uri), "mimeType": r.mime_type, "meta": r.meta}
    if hasattr(r, "text"):
        out["text"] = r.text
    else:
        out["blob"] = r.blob
    return out


def _block(b: Any) -> dict[str, Any]:
    """One content block in the MCP Python SDK 1.x ``model_dump()`` shape (field names, not aliases)."""
    kind = getattr(b, "type", None)
    if kind == "text":
        return {"type": "text", "text": b.text, "annotations": _annotations(b.annotations), "meta": b.meta}
    if kind in ("image", "audio"):
        return {
            "type": kind,
            "data": b.data,
            "mimeType": b.mime_type,
            "annotations": _annotations(b.annotations),
            "meta": b.meta,
        }
    if kind == "resource":
        return {
            "type": "resource",
            "resource": _resource_contents(b.resource),
            "annotations": _annotations(b.annotations),
            "meta": b.meta,
        }
    if kind == "resource_link":
        return {
            "name": b.name,
            "title": b.title,
            "uri": _str(b.uri),
            "description": b.description,
            "mimeType": b.mime_type,
            "size": b.size,
            "annotations": _annotations(b.annotations),
            "meta": b.meta,
            "type": "resource_link",
        }
    return b.model_dump(mode="json") if hasattr(b, "model_dump") else {"type": str(kind)}


def mcp1_result_dump(result: Any) -> dict[str, Any]:
    """A CallToolResult as MCP Python SDK 1.12's ``model_dump()`` gives it (MCPMark pins mcp 1.12.1):
    ``meta``, ``content``, ``structuredContent``, ``isError``, in that order."""
    return {
        "meta": result.meta,
        "content": [_block(b) for b in result.content or []],
        "structuredContent": result.structured_content,
        "isError": bool(result.is_error),
    }


def _json_default(obj: Any) -> Any:
    return str(obj)  # MCPMark's encoder turns URLs (pydantic AnyUrl) into strings; nothing else is left


def mcpmark_tool_content(result: Any) -> str:
    """The tool message MCPMark's agent sends: ``json.dumps`` with Python's defaults (ASCII-escaped)."""
    return json.dumps(mcp1_result_dump(result), default=_json_default)


def simplify_schema_for_gemini(schema: Any) -> Any:
    """MCPMark's schema simplification for Gemini models: a list of types becomes its first type."""
    if not isinstance(schema, dict):
        return schema or {}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            out[key] = value[0] if value else "string"
        elif isinstance(value, dict) and key == "properties":
            out[key] = {k: simplify_schema_for_gemini(v) for k, v in value.items()}
        elif isinstance(value, dict):
            out[key] = simplify_schema_for_gemini(value)
        elif isinstance(value, list) and key not in ("required", "enum"):
            out[key] = [simplify_schema_for_gemini(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out


def _is_gemini(model: str) -> bool:
    low = model.lower()
    return "gemini" in low or "bison" in low


@dataclass(frozen=True)
class Conversation:
    """The words of the tool-calling loop. ``name`` is recorded with every trial."""

    name: str

    @property
    def mcpmark(self) -> bool:
        return self.name == "mcpmark"

    def opening(self, task: Task) -> list[dict[str, Any]]:
        if self.mcpmark:
            return [
                {"role": "system", "content": protocol.text("system_prompt")},
                {"role": "user", "content": protocol.instruction(task.service, task.description)},
            ]
        return [{"role": "user", "content": task.description}]

    def tools(self, listed: list[Any], model: str) -> list[dict[str, Any]]:
        if not self.mcpmark:
            return [tool_to_openai(t) for t in listed]
        gemini = _is_gemini(model)
        out = []
        for t in listed:
            schema = t.input_schema
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": simplify_schema_for_gemini(schema) if gemini else schema,
                    },
                }
            )
        return out

    def llm_target(self, target: LLMTarget, tools: list[dict[str, Any]]) -> LLMTarget:
        """The target the loop calls: MCPMark's adds ``mcpmark_params`` (``mcpmark_target``, as the ReAct agent's)
        and tries a call the model failed as often as MCPMark's loop does (``MCPMARK_LLM_ATTEMPTS``); mcpfleet's
        own adds nothing."""
        if not self.mcpmark:
            return target
        return dataclasses.replace(mcpmark_target(target, tools), model_fault_retries=MCPMARK_LLM_ATTEMPTS - 1)

    def tool_content(self, result: Any) -> str:
        return mcpmark_tool_content(result) if self.mcpmark else result_text(result)

    def tool_failed(self, error: str) -> str:
        return protocol.render("tool_error", error=error) if self.mcpmark else f"Error: {error}"

    def tool_timed_out(self, name: str, seconds: float) -> str:
        if self.mcpmark:
            return protocol.render(
                "tool_error", error=protocol.render("tool_timeout", name=name, seconds=f"{seconds:g}")
            )
        return f"Error: tool call timed out after {seconds:g} s"

    def assistant_message(self, message: Any, content: str, calls: list[Any]) -> dict[str, Any]:
        """The assistant turn as kept in the history (and sent back to the model on the next call).

        ``calls`` are the normalised tool calls (``llm.ToolCall``: ids unique in the conversation)."""
        if self.mcpmark and hasattr(message, "model_dump"):
            out = message.model_dump()  # as MCPMark keeps it: provider fields included
            kept = out.get("tool_calls") or []
            if len(kept) == len(calls):  # ids a strict provider would reject were replaced: keep them in step
                for item, c in zip(kept, calls, strict=True):
                    if isinstance(item, dict):
                        item["id"] = c.id
            return out
        out = {"role": "assistant", "content": content or None}
        if calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
        return out


MCPMARK = Conversation("mcpmark")
MCPFLEET = Conversation("mcpfleet")


def turn_limit_error(max_turns: int) -> str:
    return protocol.render("turn_limit_error", max_turns=max_turns)


def timeout_error(seconds: float) -> str:
    return protocol.render("timeout_error", timeout=f"{seconds:g}")
