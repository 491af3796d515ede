"""Token counting: a local tokenizer and what a chat message or a tool declaration costs.

The counter is tiktoken's ``o200k_base`` from package data (loaded once per process, its sha256
checked), else bytes / 4. The server's tokenizer may differ: the ledger (``ledger.py``) scales
these counts by a ratio it learns. Counts of texts that sessions share are made once.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from orchestrator.models.base import REASONING

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


def tools_tokens(count: Callable[[str], int], tools: Sequence[Mapping[str, Any]]) -> int:
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
