"""Where a task's words lead in the code: the places a one-line request may try when the
failure pins none.

An explore-needed task's failing test exercises an entry point, and the bug sits a module or
two past it, in code no word of the explorers' questions may name. Each sentence of the task
(and the whole of it) is asked of the retrieval (``retrieve.py``) as a question, ranked by the
task's rare words; the source windows each brings are fused by rank (a window several sentences
bring, high, comes first); the definitions the best of them call, one and two calls away, are
ranked by how much of the task's rarity they hold (``Retriever.followed``). The two lists are
interleaved, callees first: the entry points the words name are usually the callers of the bug.
Measured on the eight explore-needed live tasks (``tests/test_leads.py``): the line the
reference fix changes lies in one of the first six leads for seven of them.

No model is asked; a task's leads take milliseconds over a small tree.
"""

from __future__ import annotations

import re
from itertools import zip_longest

from orchestrator.localize import repomap
from orchestrator.localize.candidates import file_factor
from orchestrator.localize.retrieve import Retriever, Window
from orchestrator.localize.terms import terms

LEADS = 6  # places a task's leads name, at most
PER_QUESTION = 6  # windows asked of each sentence
FOLLOWED_FROM = 4  # the best fused windows whose calls are followed
SENTENCES = 12  # of a long task, the first this many sentences are asked
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
    return out


def _source(path: str) -> bool:
    """Code the build may change: not a test, a doc, or a file without a symbol map."""
    return file_factor(path) == 1.0 and repomap.supported(path)
