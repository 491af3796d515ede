"""Where a task's words lead in the code: the places a one-line request may try when the
failure pins none.

An explore-needed task's failing test exercises an entry point, and the bug sits a module or
two past it, in code no word of the explorers' questions may name. Each sentence of the task
(and the whole of it) is asked of the retrieval (``retrieve.py``) as a question, ranked by the
task's rare words; the source windows each brings are fused by rank (a window several sentences
bring, high, comes first); the definitions the best of them call, one and two calls away, are
ranked by how much of the task's rarity they hold (``Retriever.followed``). The two lists are
interleaved, callees first: the entry points the words name are usually the callers of the bug.
A module constant's table and a lead a few lines below it that reads it are one place, as the
one-line request shows a pinned function with its constant (``places.line_span``): live on
xp-loyalty-tier the ``TIERS`` table and ``tier_for`` three lines below it were the fourth and
fifth leads, each asked alone, the table's samples spent on data that was right. Measured on
the eight explore-needed live tasks (``tests/test_leads.py``): the line the reference fix
changes lies in one of the first six leads for seven of them.

No model is asked; a task's leads take milliseconds over a small tree.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import zip_longest

from orchestrator.localize import repomap
from orchestrator.localize.candidates import CONSTANT, file_factor
from orchestrator.localize.retrieve import Retriever, Window
from orchestrator.localize.terms import terms

LEADS = 6  # places a task's leads name, at most
PER_QUESTION = 6  # windows asked of each sentence
FOLLOWED_FROM = 4  # the best fused windows whose calls are followed
SENTENCES = 12  # of a long task, the first this many sentences are asked
BELOW_CONSTANT = 12  # a lead starting this few lines below a constant's lead, reading it, joins it
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+")


def leads(retriever: Retriever, task: str, limit: int = LEADS) -> list[Window]:
    """Source windows the ``task``'s words lead to, best first, no two overlapping."""
    said = [s for s in _SENTENCE.split(task) if s.strip() and s.strip() != task.strip()]
    asked = [task, *said[:SENTENCES]]
    score: dict[tuple[str, int, int], float] = {}
    seen: dict[tuple[str, int, int], Window] = {}
    for question in asked:
        found = [w for w in retriever.windows(question, context=task, limit=PER_QUESTION)
                 if _source(w.path)]
        for rank, w in enumerate(found, 1):
            key = (w.path, w.start, w.end)
            score[key] = score.get(key, 0.0) + 1.0 / rank
            seen.setdefault(key, w)
    order = {key: i for i, key in enumerate(seen)}
    direct = [seen[k] for k in sorted(score, key=lambda k: (-score[k], order[k]))]
    about = [t for t in terms(task) if t.kind != "path"]
    called = retriever.followed(direct[:FOLLOWED_FROM], {t: 1.0 for t in about},
                                retriever.rarity(about)) if about and direct else []
    out: list[Window] = []
    for pair in zip_longest([w for w in called if _source(w.path)], direct):
        for w in pair:
            if w is not None and len(out) < limit and not any(
                    o.path == w.path and o.start <= w.end and w.start <= o.end for o in out):
                out.append(w)
    return _with_constants(out)


def _with_constants(found: list[Window]) -> list[Window]:
    """``found`` with each module constant's lead joined to a lead of its file that starts at
    most ``BELOW_CONSTANT`` lines below it and names it, at the better rank of the two."""
    out = list(found)
    for table in found:
        m = CONSTANT.match(table.lines[0][1]) if table.lines else None
        reader = next((w for w in out if m and w.path == table.path
                       and 0 < w.start - table.end <= BELOW_CONSTANT
                       and any(re.search(rf"\b{m.group(1)}\b", t) for _, t in w.lines)), None)
        if reader is None or table not in out:
            continue
        joined = replace(min(table, reader, key=out.index), start=table.start, end=reader.end,
                         lines=(*table.lines, *reader.lines),
                         held=tuple(dict.fromkeys((*table.held, *reader.held))))
        at = min(out.index(table), out.index(reader))
        out = [w for w in out if w is not table and w is not reader]
        out.insert(at, joined)
    return out


def _source(path: str) -> bool:
    """Code the build may change: not a test, a doc, or a file without a symbol map."""
    return file_factor(path) == 1.0 and repomap.supported(path)
