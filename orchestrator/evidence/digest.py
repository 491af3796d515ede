"""The builder's view of what the explorers found: verified claims, merged and capped.

Pure functions: what the run knew about its tests comes first; claims from all explorers are
de-duplicated (same citation ranges or same text), claims that only restated those tests are
left out with a count, each explorer's share is capped, and so is the whole digest, so the
builder's context stays lean however many explorers ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from orchestrator.config.prompts import evidence as _t
from orchestrator.evidence.known import for_builder
from orchestrator.state import Claim, ExplorerResult, KnownTests


def approx_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def render_claim(claim: Claim, quote_chars: int = 240) -> str:
    refs = ", ".join(f"{c.path}:{c.start_line}-{c.end_line}" for c in claim.citations)
    lines = [f"- {claim.text} [{refs}]"]
    quote = claim.citations[0].quote.strip() if claim.citations else ""
    if quote:
        shown = quote if len(quote) <= quote_chars else quote[:quote_chars] + "..."
        lines.append("    > " + shown.replace("\n", "\n    > "))
    return "\n".join(lines)


def _key(claim: Claim) -> tuple:
    cites = tuple(sorted((c.path, c.start_line, c.end_line) for c in claim.citations))
    return cites or (" ".join(claim.text.lower().split()),)


def _trusted(result: ExplorerResult) -> bool:
    """An answer counts only if the explorer looked and, when it made claims, one held."""
    if result.error or result.tool_calls == 0:
        return False
    return bool(result.claims) or (result.submitted == 0 and bool(result.answer.strip()))


def build_digest(
    results: Sequence[ExplorerResult],
    *,
    per_explorer_tokens: int = 1500,
    total_tokens: int = 8000,
    count: Callable[[str], int] = approx_tokens,
    known: KnownTests | None = None,
) -> str:
    """Render what is known about the tests, then verified claims by question, within both caps."""
    seen: set[tuple] = set()
    tests = for_builder(known)
    sections: list[str] = [tests] if tests else []
    used = count(tests)
    restated: list[str] = []
    for result in sorted(results, key=lambda r: r.index):
        if not _trusted(result):
            if result.adds_nothing and not result.error:
                restated.append(_t("digest_restated_question", n=result.index + 1,
                                   question=result.question, count=result.adds_nothing))
            continue
        head = _t("digest_answer", n=result.index + 1, question=result.question,
                  answer=result.answer.strip())
        budget = min(per_explorer_tokens, total_tokens - used)
        if budget <= count(head):
            break
        parts, spent, omitted = [head], count(head), 0
        for claim in result.claims:
            key = _key(claim)
            if key in seen:
                continue
            text = render_claim(claim)
            cost = count(text) + 1
            if spent + cost > budget:
                omitted += 1
                continue
            seen.add(key)
            parts.append(text)
            spent += cost
        if omitted:
            parts.append(_t("digest_omitted", count=omitted))
        if result.adds_nothing:
            parts.append(_t("digest_restated", count=result.adds_nothing))
        sections.append("\n".join(parts))
        used += spent
    if len(sections) == (1 if tests else 0):
        sections.append(_t("digest_none"))
    if restated and used + count("\n".join(restated)) <= total_tokens:
        sections.append("\n".join(restated))
    return "\n\n".join(sections)
