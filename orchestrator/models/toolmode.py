"""Tools for models without native tool calls: ``JsonToolsClient`` asks for one
``{"tool": NAME, "arguments": {...}}`` object instead and turns it back into a tool call.

How the object is requested follows the model's ``structured`` setting: ``json_schema`` sends a
schema that is an ``anyOf`` over the tools (servers enforce it by grammar), ``json_object``
asks for any JSON object, ``prompt`` relies on an instruction listing the tools. The history is
rewritten without ``tool_calls`` or ``tool`` messages, which such servers' chat templates often
reject. Fenced JSON and ``{"name": ..., "arguments": ...}`` are accepted; anything unparseable is
returned as content, so the session nudges the model as it would any chatty reply.

Small models need the schema flat and the result's shape spelled out: ``$ref``s are inlined, every
field of ``submit`` is required (so the grammar makes the model write its ``claims`` or
``questions`` instead of skipping them), and the instruction shows ``submit`` as a JSON skeleton.
Citations are grounded: once tool results have shown file lines (``read``'s numbered lines,
``search``'s ``path:line:`` matches), each citation in ``submit`` must be one of those lines, so a
weak model picks evidence instead of inventing it; whether the line supports the claim is still
its call. A model that loops (the same call again, or the same result) is offered only ``submit``
(``loops.narrowed``, the rule native tool calls share). ``read_artifact`` is offered only once
the history names an artifact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from orchestrator.config.prompts import text
from orchestrator.models import repair
from orchestrator.models.base import (
    REASONING,
    Completion,
    ModelClient,
    Progress,
    Route,
    ToolCallData,
    Until,
)
from orchestrator.models.listing import Listing, Listings
from orchestrator.models.loops import FINAL_TOOL, narrowed, with_notes
from orchestrator.models.repeats import RepeatedItem
from orchestrator.tools.shown import places

Structured = Literal["json_schema", "json_object", "prompt"]
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
ARTIFACT_TOOL = "read_artifact"
_DROP_KEYS = ("title", "$defs", "default")
CITATION_FIELDS = frozenset({"path", "start_line", "end_line", "quote"})
MAX_EVIDENCE = 160  # cited lines offered to the grammar, the most recent first
MAX_ITEMS = 4  # per list in a json_schema submission: enough claims, short enough to finish
MAX_CHARS = 600  # per string argument under json_schema: room for code, not for a loop
# submit's prose (an explorer's answer, a claim's text) under json_schema: two sentences. Live,
# the 0.5B explorer looped inside these strings until its 600 output tokens ran out (~40 s a
# question on the kit), the citations it was asked for written last
PROSE_CHARS = 280
PROSE_FIELDS = frozenset({"answer", "text"})


def flat_schema(schema: Mapping[str, Any], *, require_all: bool = False,
                max_items: int | None = None, max_chars: int | None = None,
                prose_chars: int | None = None) -> dict[str, Any]:
    """``schema`` with local ``$ref``s inlined and titles dropped. With ``require_all`` every
    object property is required, so a grammar-constrained model writes each one; ``max_items``
    caps every array and ``max_chars`` every string, so a model that repeats itself still
    closes its JSON within its output limit; ``prose_chars`` caps the strings named in
    ``PROSE_FIELDS`` tighter."""
    defs = schema.get("$defs", {})

    def walk(node: Any, name: str = "") -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return walk(defs[ref.removeprefix("#/$defs/")], name)
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "properties" and isinstance(v, Mapping):
                out[k] = {prop: walk(sub, prop) for prop, sub in v.items()}
            elif k not in _DROP_KEYS:
                out[k] = walk(v)
        if require_all and isinstance(out.get("properties"), Mapping):
            out["required"] = list(out["properties"])
        if max_items is not None and out.get("type") == "array":
            out["maxItems"] = min(max_items, out.get("maxItems", max_items))
        cap = prose_chars if prose_chars is not None and name in PROSE_FIELDS else max_chars
        if cap is not None and out.get("type") == "string":
            out["maxLength"] = min(cap, out.get("maxLength", cap))
        return out

    return walk(schema)


def evidence(messages: Sequence[Mapping[str, Any]], limit: int = MAX_EVIDENCE
             ) -> list[dict[str, Any]]:
    """The places the session was shown (``tools/shown.py``: reads, search matches, candidate
    windows) as citations, the most recent first."""
    return places(messages)[:limit]


def ground(schema: Mapping[str, Any], cited: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``schema`` with every citation object (path, start_line, end_line, quote) narrowed to one
    of ``cited``, and at least one citation wherever a list of them is asked for."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, Mapping):
            return node
        if _is_citation(node.get("items")):
            return {**node, "items": {"enum": list(cited)}, "minItems": 1}
        if _is_citation(node):
            return {"enum": list(cited)}
        return {k: walk(v) for k, v in node.items()}

    return walk(schema) if cited else dict(schema)


def _asks_citations(tool: Mapping[str, Any]) -> bool:
    params = flat_schema(tool["function"].get("parameters") or {})
    return ground(params, [{}]) != params


def _is_citation(node: Any) -> bool:
    return isinstance(node, Mapping) and CITATION_FIELDS <= set(node.get("properties") or ())


def tool_call_schema(tools: Sequence[Mapping[str, Any]], *, max_items: int | None = MAX_ITEMS,
                     optional: bool = True, cited: Sequence[Mapping[str, Any]] = ()
                     ) -> dict[str, Any]:
    """One JSON schema for "call exactly one of these tools": an anyOf, one branch per tool.
    ``submit`` gets every field required, its lists capped at ``max_items`` and its citations
    limited to ``cited`` (when given); without ``optional`` the other tools take only their
    required arguments."""
    branches = []
    for tool in tools:
        fn = tool["function"]
        final = fn["name"] == FINAL_TOOL
        params = arguments_schema(fn, optional=optional or final)
        params = flat_schema(params, require_all=final, max_items=max_items if final else None,
                             max_chars=MAX_CHARS, prose_chars=PROSE_CHARS if final else None)
        if final:
            params = ground(params, cited)
        branches.append({
            "type": "object",
            "properties": {"tool": {"const": fn["name"]}, "arguments": params},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        })
    return {"anyOf": branches}


def arguments_schema(fn: Mapping[str, Any], *, optional: bool = True) -> dict[str, Any]:
    """A tool's parameters; without ``optional``, only the required ones."""
    params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
    if not optional:
        required = set(params.get("required") or ())
        params["properties"] = {k: v for k, v in (params.get("properties") or {}).items()
                                if k in required}
    return params


def response_format_for(tools: Sequence[Mapping[str, Any]], structured: Structured, *,
                        optional: bool = True, cited: Sequence[Mapping[str, Any]] = ()
                        ) -> dict[str, Any] | None:
    if structured == "json_schema":
        schema = tool_call_schema(tools, optional=optional, cited=cited)
        return {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}}
    if structured == "json_object":
        return {"type": "json_object"}
    return None


def skeleton(schema: Mapping[str, Any]) -> Any:
    """An example value of ``schema``: strings show their description, lists one item."""
    schema = _nullable(schema)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: skeleton(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        items = schema.get("items") or {}
        if "description" in schema and "description" not in items:
            items = {**items, "description": schema["description"]}
        return [skeleton(items)]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return f"<{schema.get('description') or 'text'}>"


def _nullable(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    options = [s for s in schema.get("anyOf", ()) if s.get("type") != "null"]
    return {**options[0], **{k: v for k, v in schema.items() if k != "anyOf"}} if options else schema


def signature(name: str, params: Mapping[str, Any]) -> str:
    """``read(path, start_line?, end_line?)``: the argument names, optional ones marked."""
    required = set(params.get("required") or ())
    names = [p if p in required else f"{p}?" for p in params.get("properties") or {}]
    return f"{name}({', '.join(names)})"


def tool_instruction(tools: Sequence[Mapping[str, Any]], structured: Structured, *,
                     optional: bool = True, header: str = "instruction") -> str:
    """The system-prompt addendum that lists the tools; full schemas only when nothing enforces
    them, else the argument names, and ``submit`` as a skeleton to fill in. ``header`` names
    the template the listing opens with (``more_tools`` for tools offered after the first turn)."""
    lines = [text("toolmode", header)]
    for tool in tools:
        fn = tool["function"]
        final = fn["name"] == FINAL_TOOL
        params = flat_schema(arguments_schema(fn, optional=optional or final
                                              or structured != "json_schema"))
        described = f"{fn.get('description', '').strip()}"
        if structured != "json_schema":
            lines.append(text("toolmode", "tool_with_schema", name=fn["name"],
                              description=described, schema=json.dumps(params)))
        elif final:
            lines.append(text("toolmode", "submit_skeleton", name=FINAL_TOOL,
                              description=described, skeleton=json.dumps(skeleton(params))))
        else:
            lines.append(text("toolmode", "tool_signature", signature=signature(fn["name"], params),
                              description=described))
    return "\n".join(lines)


def rewrite_history(messages: Sequence[Mapping[str, Any]], instruction: str
                    ) -> list[dict[str, Any]]:
    """Tool calls become the JSON the model would have written; tool results become user turns."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in messages:
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            calls = [c["function"] for c in m["tool_calls"]]
            names.update({c["id"]: c["function"]["name"] for c in m["tool_calls"]})
            written = "\n".join(
                json.dumps({"tool": c["name"], "arguments": repair.value(c["arguments"])})
                for c in calls)
            kept = {REASONING: m[REASONING]} if REASONING in m else {}
            out.append({"role": "assistant", "content": written, **kept})
        elif role == "tool":
            name = names.get(str(m.get("tool_call_id")), "tool")
            out.append({"role": "user", "content": text("toolmode", "tool_result", name=name,
                                                         content=m.get("content") or "")})
        else:
            out.append(dict(m))
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{instruction}"
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def offered(tools: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]]
            ) -> list[Mapping[str, Any]]:
    """The tools worth showing: ``read_artifact`` only once some message names an artifact."""
    named = any(f"{ARTIFACT_TOOL}(" in str(m.get("content") or "") for m in messages)
    return [t for t in tools if named or t["function"]["name"] != ARTIFACT_TOOL]


def parse_tool_calls(content: str | None) -> list[ToolCallData]:
    """Tool calls written into ``content``: every fenced JSON block that names a tool, else the
    first bare one (the whole text, or its outermost braces). Keys ``tool``/``name``."""
    if not content:
        return []
    fenced = [_as_call(repair.value(m.group(1).strip())) for m in _FENCE.finditer(content)]
    calls = [c for c in fenced if c is not None]
    if not calls:
        stripped = content.strip()
        start, end = stripped.find("{"), stripped.rfind("}")
        bare = [stripped, stripped[start:end + 1]] if 0 <= start < end else [stripped]
        calls = next(([c] for c in map(_as_call, map(repair.value, bare)) if c is not None), [])
    return [replace(c, id=f"content_call_{i}") for i, c in enumerate(calls)]


def parse_tool_call(content: str | None) -> ToolCallData | None:
    """The first tool call in ``content``, or None (see :func:`parse_tool_calls`)."""
    calls = parse_tool_calls(content)
    return calls[0] if calls else None


def _as_call(obj: Any) -> ToolCallData | None:
    if not isinstance(obj, Mapping):
        return None
    name = obj.get("tool") or obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        parsed = repair.value(args)
        args = parsed if isinstance(parsed, Mapping) else args
    text = args if isinstance(args, str) else json.dumps(args)
    return ToolCallData("content_call_0", name, text)


class JsonToolsClient:
    """A ``ModelClient`` that gives ``inner`` tools through JSON content instead of ``tools``."""

    def __init__(self, inner: ModelClient, structured: Structured = "json_schema", *,
                 repeats: int = 3, optional: bool = False) -> None:
        self.inner = inner
        self.structured = structured
        self.repeats = repeats
        self.optional = optional
        self._calls = 0
        self._listings = Listings()

    def _prompt(self, messages: Sequence[Mapping[str, Any]], listing: Listing
                ) -> list[dict[str, Any]]:
        """The history rewritten, the first turn's tools in the system prompt and each tool
        offered later after the message it first followed (``listing``), so the prompt only
        grows from turn to turn (a provider's prompt cache keeps it) while the grammar and a
        closing note narrow what may be called now."""
        history = rewrite_history(messages, tool_instruction(listing.first, self.structured,
                                                             optional=self.optional))
        shift = len(history) - len(messages)  # the system message rewrite_history may add
        for group in sorted(listing.later, key=lambda g: -g.at):
            more = tool_instruction(group.tools, self.structured, optional=self.optional,
                                    header="more_tools")
            i = group.at + shift
            if history[i].get("role") == "user":
                history[i] = {**history[i], "content": f"{history[i].get('content') or ''}"
                                                       f"\n\n{more}"}
            else:
                history.insert(i + 1, {"role": "user", "content": more})
        return history

    @property
    def route(self) -> Route:
        return self.inner.route

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
        until: Until | None = None,
    ) -> Completion:
        if not tools:
            return await self.inner.complete(messages, session=session,
                                             response_format=response_format, progress=progress,
                                             until=until)
        tools, notes = narrowed(offered(tools, messages), messages, self.repeats)
        final = [t for t in tools if t["function"]["name"] == FINAL_TOOL]
        cited = evidence(messages) if self.structured == "json_schema" and final else []
        if cited and _asks_citations(final[0]):
            notes.append(text("toolmode", "grounded_note"))
        listing = self._listings.update(session, tools, messages)
        if len(tools) < len(listing.tools()):
            notes.insert(0, text("toolmode", "call_only",
                                 names=", ".join(t["function"]["name"] for t in tools)))
        completion = await self.inner.complete(
            with_notes(self._prompt(messages, listing), notes),
            session=session,
            response_format=response_format_for(tools, self.structured, optional=self.optional,
                                                cited=cited),
            progress=progress,
            # a call is one JSON object: an item its lists repeat ends the reply there
            until=until or RepeatedItem,
        )
        call = parse_tool_call(completion.content)
        if completion.tool_calls:
            return completion
        if call is None:  # a cut-off JSON left in the history gets copied by weak models
            if completion.finish_reason == "length" and self.structured != "prompt":
                return replace(completion, content=text("toolmode", "cut_off"))
            return completion
        self._calls += 1
        call = ToolCallData(f"json_call_{self._calls}", call.name, call.arguments)
        return replace(completion, content=None, tool_calls=(call,), finish_reason="tool_calls")
