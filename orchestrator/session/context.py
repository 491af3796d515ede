"""Context accounting for sessions: token counting, the per-session ledger, the per-role policy,
masking of old tool outputs, the transcript a summariser sees, and the session tree for reports.

The ledger anchors on the prompt size the server last reported and estimates only what was added
since, with a local tokenizer (tiktoken ``o200k_base`` from package data, else bytes / 4) scaled by
a ratio learned from consecutive anchors, since the server's tokenizer may differ from ours.
Everything here is pure or owns its own small state; the session decides when to act.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.config.prompts import text
from orchestrator.config.schema import ModelSpec, RoleSpec
from orchestrator.errors import ConfigError
from orchestrator.models.base import REASONING
from orchestrator.record.events import EventBase, Forked, RoleFinished, RoleStarted

# --- token counting -----------------------------------------------------------------------------

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
PER_MESSAGE = 3  # role markers and separators the chat format adds to every message


@dataclass(frozen=True)
class TokenCounter:
    """A local tokenizer: ``name`` says which (``o200k_base`` or ``bytes/4``)."""

    name: str
    count: Callable[[str], int]


def bytes_counter() -> TokenCounter:
    return TokenCounter("bytes/4", lambda text: (len(text.encode("utf-8")) + 3) // 4)


_lock = threading.Lock()
_loaded: list[TokenCounter] = []


def loaded_counter() -> TokenCounter | None:
    """The token counter if this process has loaded it already (so no thread is needed)."""
    return _loaded[0] if _loaded else None


def token_counter() -> TokenCounter:
    """o200k_base when its packaged file loads (once per process), else bytes / 4."""
    with _lock:
        if not _loaded:
            try:
                enc = _load_o200k()
                _loaded.append(TokenCounter("o200k_base", lambda t: len(enc.encode_ordinary(t))))
            except (OSError, ValueError, ImportError):
                _loaded.append(bytes_counter())
        return _loaded[0]


def _load_o200k() -> Any:
    import tiktoken

    data = gzip.decompress(
        resources.files("orchestrator.data").joinpath("o200k_base.tiktoken.gz").read_bytes()
    )
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise ValueError("packaged o200k_base file does not match its sha256")
    user_dir = os.environ.get("TIKTOKEN_CACHE_DIR")
    cache = Path(user_dir) if user_dir else _own_cache_dir()
    _seed(cache / hashlib.sha1(O200K_URL.encode()).hexdigest(), data)
    if user_dir:
        return tiktoken.get_encoding("o200k_base")
    # tiktoken takes its cache location only from this variable; it is set just for the one
    # load (the encoding is then cached in-process) so the host's environment is left as found.
    with _env("TIKTOKEN_CACHE_DIR", str(cache)):
        return tiktoken.get_encoding("o200k_base")


def _own_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    for candidate in (Path(base), Path(tempfile.gettempdir())):
        path = candidate / "orchestrator" / "tiktoken"
        try:
            path.mkdir(parents=True, exist_ok=True)
            return path
        except OSError:
            continue
    raise OSError("no writable cache directory for the tokenizer")


def _seed(path: Path, data: bytes) -> None:
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == O200K_SHA256:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


@contextmanager
def _env(key: str, value: str) -> Iterator[None]:
    old = os.environ.get(key)
    os.environ[key] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def message_tokens(message: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """Local tokens of one chat message: its text, its tool calls, the reasoning it carries
    back to the server (as many tokens as the server said it reasoned: the encrypted text says
    nothing about its size), and the per-message frame."""
    content = message.get("content")
    n = _counted(count, content) if isinstance(content, str) and content else 0
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += count(fn.get("name") or "") + count(fn.get("arguments") or "")
    reasoning = message.get(REASONING)
    if isinstance(reasoning, Mapping):
        n += int(reasoning.get("tokens") or 0)
    return n + PER_MESSAGE


@functools.lru_cache(maxsize=256)
def _counted(count: Callable[[str], int], text: str) -> int:
    """A count of a text that sessions share, made once: a role's tool declarations and
    system prompt, a task's opening, a file several explorers read. The counter runs at
    ~10 MB/s here and gives up the interpreter lock on each call (a thread may then hold the
    event loop up), so counting a text again is what a session's start mostly cost."""
    return count(text)


_tool_counts: dict[tuple[Any, ...], tuple[int, list[Any]]] = {}


def _tools_tokens(count: Callable[[str], int], tools: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of a session's tool declarations. Every session of a role declares the same
    tools, each made afresh, with the parameters schema shared (``tools.base.parameters``):
    known by name, description and that schema, the count is not serialised again. (The
    schemas are kept with the count, so their ids stay theirs.)"""
    schemas: list[Any] = []
    key: list[Any] = [count]
    for tool in tools:
        fn = tool.get("function")
        if not isinstance(fn, Mapping) or not isinstance(fn.get("parameters"), dict):
            return _counted(count, json.dumps(list(tools)))
        schemas.append(fn["parameters"])
        key.append((*((k, v) for k, v in tool.items() if k != "function"),
                    *((k, v) for k, v in fn.items() if k != "parameters"), id(fn["parameters"])))
    try:
        known = _tool_counts.get(tuple(key))
    except TypeError:  # a value that cannot be a key
        return _counted(count, json.dumps(list(tools)))
    if known is None:
        if len(_tool_counts) >= 256:
            _tool_counts.clear()
        known = _tool_counts[tuple(key)] = (count(json.dumps(list(tools))), schemas)
    return known[0]


# --- policy -------------------------------------------------------------------------------------

PAGE_CAP = 8_000


@dataclass(frozen=True)
class ContextPolicy:
    """How much of a window a session may fill before it masks or forks (server tokens)."""

    window: int
    fork_at: float = 0.8
    max_output: int = 4_000
    reserve_cfg: int | None = None
    keep_verbatim: int = 3
    max_forks: int = 8

    @property
    def reserve(self) -> int:
        return self.reserve_cfg or min(self.max_output, self.window // 4)

    @property
    def limit(self) -> int:
        """The largest prompt that still leaves room for the reply below ``fork_at``."""
        return int(self.fork_at * self.window) - self.reserve

    @property
    def page_cap(self) -> int:
        return min(PAGE_CAP, self.window // 4)

    def over(self, estimate: int) -> bool:
        return estimate > self.limit

    def shrunk(self, window: int) -> ContextPolicy:
        """The same policy for a smaller window the server turned out to have."""
        return replace(self, window=min(self.window, window))


def policy_for(spec: RoleSpec, model: ModelSpec) -> ContextPolicy:
    window = min(model.context_window, spec.context_window_cap or model.context_window)
    return ContextPolicy(window=window, fork_at=spec.context_fork_at, max_output=model.max_output,
                         reserve_cfg=spec.output_reserve)


_LIMIT = re.compile(r"(?:maximum context length is|context size \()\s*(\d+)", re.I)
_USED = (re.compile(r"(\d+) in the messages", re.I), re.compile(r"resulted in (\d+) tokens", re.I))


def parse_overflow(message: str) -> tuple[int | None, int | None]:
    """(prompt tokens the server counted, its window) from an overflow message, when it says."""
    used = next((m for m in (p.search(message) for p in _USED) if m), None)
    limit = _LIMIT.search(message)
    return (int(used.group(1)) if used else None), (int(limit.group(1)) if limit else None)


# --- the ledger ---------------------------------------------------------------------------------

MIN_DELTA = 8  # local tokens; smaller steps say more about rounding than about the ratio


class Ledger:
    """Per-message local counts, the last server anchor and the server/local ratio."""

    def __init__(self, count: Callable[[str], int], *, ratio: float = 1.0, decay: float = 0.8):
        self._count = count
        self._decay = decay
        self.counts: list[int] = []
        self.local = 0
        self._tools = 0
        self.ratio = ratio
        self._num = self._den = 0.0
        self._anchor: tuple[int, int] | None = None
        self._first: tuple[int, int] | None = None

    def set_tools(self, tools: Sequence[Mapping[str, Any]]) -> None:
        n = _tools_tokens(self._count, tools) if tools else 0
        self.local += n - self._tools
        self._tools = n

    def append(self, message: Mapping[str, Any]) -> None:
        n = message_tokens(message, self._count)
        self.counts.append(n)
        self.local += n

    def replace(self, index: int, message: Mapping[str, Any]) -> None:
        n = message_tokens(message, self._count)
        self.local += n - self.counts[index]
        self.counts[index] = n

    def reset(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Start over with these messages (same tools and system prompt, new opening).

        The ratio is kept, and the first anchor becomes the anchor again: the new prompt is
        the first one with a different opening, so only that difference is estimated.
        """
        self.counts, self.local, self._anchor = [], self._tools, self._first
        for m in messages:
            self.append(m)

    def tokens(self, text: str) -> int:
        """Server tokens of a piece of text, as far as the calibration knows."""
        return round(self.ratio * self._count(text))

    def estimate(self) -> int:
        if self._anchor is None:
            return round(self.ratio * self.local)
        server, local = self._anchor
        return max(0, round(server + self.ratio * (self.local - local)))

    def observe(self, prompt_tokens: int) -> None:
        """The server's count for the prompt just sent: learn from it and make it the anchor."""
        if prompt_tokens <= 0:
            return
        server, local = self._anchor or (0, 0)
        d_server, d_local = prompt_tokens - server, self.local - local
        if d_local >= MIN_DELTA and d_server > 0:
            self._num = self._num * self._decay + d_server
            self._den = self._den * self._decay + d_local
            self.ratio = self._num / self._den
        self._anchor = (prompt_tokens, self.local)
        self._first = self._first or self._anchor

    def refused(self, prompt_tokens: int | None, window: int | None) -> None:
        """The server refused the prompt as too long: our estimate was too low."""
        floor = prompt_tokens or (window + 1 if window else int(self.estimate() * 1.1) + 1)
        if floor > self.estimate():
            self.observe(floor)


# --- masking ------------------------------------------------------------------------------------

MASK_MIN_TOKENS = 48  # below this a stub saves nothing
MASK_PREFIX = "[masked: "


def calls_by_id(messages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """tool_call_id -> (tool name, arguments JSON) over the assistant messages."""
    out: dict[str, tuple[str, str]] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            out[str(call.get("id", ""))] = (fn.get("name") or "?", fn.get("arguments") or "")
    return out


def describe_call(name: str, arguments: str, limit: int = 100) -> str:
    """``read(path=app.log, start_line=1)``: a tool call in one short line."""
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        args = None
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={v}" for k, v in args.items())
    else:
        inner = " ".join(str(arguments).split())
    text = f"{name}({inner})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


def mask_stub(call: str, tokens: int, handle: str) -> str:
    """What stands in for a masked tool output (``agents/prompts/session.md``: ``masked``)."""
    stub = text("session", "masked", call=call, tokens=f"{tokens:,}", handle=handle)
    if not stub.startswith(MASK_PREFIX):  # masked outputs are recognised by this prefix
        raise ConfigError(f"agents/prompts/session.md: masked must start with {MASK_PREFIX!r}")
    return stub


def mask_old_outputs(
    messages: Sequence[Mapping[str, Any]],
    *,
    sizes: Sequence[int],
    keep: int,
    store: Callable[[str], str],
) -> list[tuple[int, dict[str, Any]]]:
    """Stubs for every tool output but the last ``keep``: ``(index, new message)`` pairs.

    ``sizes`` are the messages' sizes in server tokens; ``store`` keeps an original and returns
    its handle. Outputs already masked, or too small for a stub to save anything, stay.
    """
    tools = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    old = tools[: max(0, len(tools) - keep)]
    calls = calls_by_id(messages)
    out = []
    for i in old:
        content = messages[i].get("content")
        if not isinstance(content, str) or content.startswith(MASK_PREFIX):
            continue
        if sizes[i] < MASK_MIN_TOKENS:
            continue
        name, args = calls.get(str(messages[i].get("tool_call_id", "")), ("tool", ""))
        stub = mask_stub(describe_call(name, args), sizes[i], store(content))
        out.append((i, {**messages[i], "content": stub}))
    return out


# --- what the summariser sees -------------------------------------------------------------------

def render_transcript(
    messages: Sequence[Mapping[str, Any]],
    *,
    budget: int,
    count: Callable[[str], int],
    skip: str | None = None,
    per_message_chars: int = 1_500,
) -> str:
    """The conversation after the system prompt, one compact block per message, newest kept.

    Each block is cut to ``per_message_chars`` (head and tail); when the blocks together exceed
    ``budget`` local tokens, the opening block (the task or the previous handoff) and as many of
    the latest as fit are kept, with a note saying how many in between were left out.
    """
    calls = calls_by_id(messages)
    blocks = [_block(m, calls, per_message_chars) for m in messages
              if m.get("role") != "system" and not (skip and m.get("content") == skip)]
    blocks = [b for b in blocks if b]
    if not blocks:
        return "(empty)"
    sizes = [count(b) + 1 for b in blocks]
    if sum(sizes) <= budget:
        return "\n".join(blocks)
    first, used = blocks[0], sizes[0]
    tail: list[str] = []
    for block, size in zip(reversed(blocks[1:]), reversed(sizes[1:]), strict=True):
        if used + size > budget:
            break
        tail.append(block)
        used += size
    if used > budget:  # the opening block alone is too big
        first = _cut(first, max(200, budget * 2))
    dropped = len(blocks) - 1 - len(tail)
    note = [f"(… {dropped} earlier messages omitted …)"] if dropped else []
    return "\n".join([first, *note, *reversed(tail)])


def _block(m: Mapping[str, Any], calls: Mapping[str, tuple[str, str]], cut: int) -> str:
    role = m.get("role")
    raw = m.get("content")
    content = raw if isinstance(raw, str) else ""
    if role == "tool":
        name, _ = calls.get(str(m.get("tool_call_id", "")), ("tool", ""))
        return f"TOOL {name}: {_cut(content, cut)}"
    if role == "assistant":
        parts = [f"ASSISTANT: {_cut(content, cut)}"] if content else []
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            call = describe_call(fn.get("name", "?"), fn.get("arguments", ""), 300)
            parts.append(f"ASSISTANT called {call}")
        return "\n".join(parts)
    return f"{str(role).upper()}: {_cut(content, cut)}" if content else ""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - 2 * half} chars cut) …\n{text[-half:]}"


# --- the session tree for `orchestrate show` ----------------------------------------------------

class SessionNode(BaseModel):
    """One session of a run as the report shows it."""

    model_config = ConfigDict(frozen=True)

    session: str
    role: str | None
    model: str | None = None
    parent: str | None = None
    purpose: str = "task"  # "task", "fork" (continues its parent) or "handoff" (summariser)
    window: int | None = None
    peak_context: float = 0.0
    forks: tuple[Forked, ...] = ()
    children: tuple[str, ...] = ()
    status: str = "open"  # "finished", "forked" or "open"


def session_tree(events: Sequence[EventBase]) -> list[SessionNode]:
    """Every session of a run's events, in order of start, with lineage and peaks."""
    nodes: dict[str, dict[str, Any]] = {}

    def node_of(sid: str, role: str | None) -> dict[str, Any]:
        return nodes.setdefault(sid, {"session": sid, "role": role, "forks": [], "children": []})

    for e in events:
        if not e.session or not isinstance(e, RoleStarted | Forked | RoleFinished):
            continue
        node = node_of(e.session, e.role)
        if isinstance(e, RoleStarted):
            node.update(role=node["role"] or e.role, model=e.model, window=e.window,
                        parent=e.parent, purpose=e.purpose)
            if e.parent:
                node_of(e.parent, None)["children"].append(e.session)
            continue
        node["peak_context"] = max(node.get("peak_context", 0.0), e.peak_context)
        if isinstance(e, Forked):
            node["forks"].append(e)
            node["status"] = "forked"
        else:
            node["status"] = "finished"
    return [SessionNode(**{**n, "forks": tuple(n["forks"]), "children": tuple(n["children"])})
            for n in nodes.values()]
