"""Whether two trees differ outside a set of paths, and a tree's files, read from tree objects
(no git process).

A build attempt asks whether it changed a file besides the failing tests (``engine/building``).
The trees are the worktree's snapshots, already written; their objects are read from a reader
the run keeps open anyway (its ``git cat-file --batch``), so the answer starts no process. The
walk goes down only into subtrees whose ids differ, and stops at the first path that differs
and is not one of the given paths. A path differs when its entry's mode or object id does, as
``git diff --name-only`` lists it; a file that became a directory (or the reverse) differs at
the file's path and at every file under the directory. ``files`` lists a tree's files, links and
submodules as ``git ls-tree -r --name-only`` does (the citation check's line counts).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator

Reader = Callable[[str], "bytes | None"]  # a tree's raw object by id; None if it is no tree
_TREE = b"40000"


class Unreadable(Exception):
    """A tree object could not be read: ask git instead."""


def differs_outside(read: Reader, before: str, after: str, paths: Collection[str]) -> bool:
    """Whether trees ``before`` and ``after`` differ at a path not in ``paths``; raises
    ``Unreadable`` when an object cannot be read."""
    if before == after:
        return False
    width = len(before) // 2  # raw id bytes: 20 (SHA-1) or 32 (SHA-256)
    return any(p not in paths for p in _differing(read, before, after, "", width))


def files(read: Reader, tree: str) -> list[str]:
    """Every path of tree ``tree`` that is not a tree, in git's order; raises ``Unreadable``."""
    return list(_differing(read, None, tree, "", len(tree) // 2))


def _entries(read: Reader, tree: str, width: int) -> dict[str, tuple[bytes, bytes]]:
    """name -> (mode, raw object id) of a tree object."""
    data = read(tree)
    if data is None:
        raise Unreadable(tree)
    out: dict[str, tuple[bytes, bytes]] = {}
    i = 0
    while i < len(data):
        space = data.index(b" ", i)
        nul = data.index(b"\0", space)
        name = data[space + 1:nul].decode("utf-8", "surrogateescape")
        out[name] = (data[i:space], data[nul + 1:nul + 1 + width])
        i = nul + 1 + width
    return out


def _differing(read: Reader, before: str | None, after: str | None, prefix: str,
               width: int) -> Iterator[str]:
    """The paths (files, links, submodules) that differ between two trees, lazily; a missing
    side (None) is an empty tree."""
    old = _entries(read, before, width) if before else {}
    new = _entries(read, after, width) if after else {}
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        path = prefix + name
        a_tree = a is not None and a[0] == _TREE
        b_tree = b is not None and b[0] == _TREE
        if (a is not None and not a_tree) or (b is not None and not b_tree):
            yield path  # a file, link or submodule changed, came or went
        if a_tree or b_tree:
            yield from _differing(read, a[1].hex() if a_tree and a else None,
                                  b[1].hex() if b_tree and b else None, path + "/", width)
