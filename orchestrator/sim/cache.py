"""The simulator's prompt cache: like a provider's, a request whose leading messages (tools
first, then each message in order) repeat those of an earlier request to the same model is
served partly from cache, and its usage says how many prompt tokens were cached.

Counting follows OpenAI's published rule, scaled by the scenario: nothing is cached below
``min_tokens``, and a cached prefix counts in whole ``block``s. A prefix is matched message by
message (hashes of each prefix), which is how a stable system prompt, tool list and repository
map get their discount and why anything that changes early in a prompt loses it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from orchestrator.sim.scenario import PER_MESSAGE_TOKENS, CacheSpec, count_text_tokens


def segments(body: dict[str, Any]) -> list[str]:
    """The request as the cache sees it: the tool list, then each message, in order."""
    out = [json.dumps(body["tools"], sort_keys=True)] if body.get("tools") else []
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            out.append(json.dumps(m, sort_keys=True))
    return out


class PrefixCache:
    """Per model, the hashes of every request prefix seen so far; safe across threads."""

    def __init__(self) -> None:
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def lookup(self, model: str, body: dict[str, Any], spec: CacheSpec, tokenizer: str,
               prompt_tokens: int) -> int:
        """Cached tokens for this request, then remember its prefixes."""
        parts = segments(body)
        hashes, digest = [], hashlib.sha256()
        for part in parts:
            digest.update(part.encode("utf-8", "surrogatepass"))
            hashes.append(digest.copy().hexdigest())
        with self._lock:
            seen = self._seen.setdefault(model, set())
            hit = 0
            while hit < len(hashes) and hashes[hit] in seen:
                hit += 1
            seen.update(hashes)
        if not spec.enabled or hit == 0 or prompt_tokens < spec.min_tokens:
            return 0
        tokens = sum(_tokens(p, tokenizer) for p in parts[:hit])
        tokens = min(tokens, prompt_tokens)
        return tokens // spec.block * spec.block

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


def _tokens(part: str, tokenizer: str) -> int:
    try:
        m = json.loads(part)
    except json.JSONDecodeError:
        m = part
    content = m.get("content") if isinstance(m, dict) else None
    text = content if isinstance(content, str) else part
    extra = PER_MESSAGE_TOKENS if isinstance(m, dict) and "role" in m else 0
    return count_text_tokens(text, tokenizer) + extra
