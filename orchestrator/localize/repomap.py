"""A compact map of source files' symbols (classes, functions, methods with their signatures and
lines), parsed with tree-sitter.

tree-sitter's official Python bindings and the grammar wheels the tree-sitter project publishes
(Python, JavaScript, Bash) parse real syntax offline, fast and error-tolerantly (a file with a
syntax error still maps); regexes would miss nested and multi-line definitions. A language whose
grammar is not installed simply maps to nothing. Pure functions: text in, symbols out.
"""

from __future__ import annotations

import functools
import importlib
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

# extension -> (grammar module, the node types that are definitions)
_PY = ("tree_sitter_python", frozenset({"class_definition", "function_definition"}))
_JS = ("tree_sitter_javascript", frozenset({
    "class_declaration", "function_declaration", "method_definition",
    "generator_function_declaration", "variable_declarator"}))
_SH = ("tree_sitter_bash", frozenset({"function_definition"}))
LANGUAGES: dict[str, tuple[str, frozenset[str]]] = {
    ".py": _PY, ".js": _JS, ".mjs": _JS, ".cjs": _JS, ".sh": _SH, ".bash": _SH,
}
_CLASSES = frozenset({"class_definition", "class_declaration"})
# what opens a function's scope: definitions inside one are not part of the file's outline
_FUNCTIONS = frozenset({"function_definition", "function_declaration", "method_definition",
                        "generator_function_declaration", "arrow_function",
                        "function_expression", "function", "generator_function"})
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression"})
MAX_SIGNATURE = 120


class Symbol(BaseModel):
    """One definition: ``kind`` is class, function or method; lines are 1-based, inclusive."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    name: str
    kind: str
    line: int
    end_line: int
    signature: str
    parent: str = ""


def supported(path: str) -> bool:
    """True when ``path``'s language has a grammar installed."""
    return _language(posixpath.splitext(path)[1]) is not None


@functools.cache
def _language(ext: str) -> tuple[Any, frozenset[str]] | None:
    """(parser, definition types) for an extension; None when its grammar is not installed."""
    spec = LANGUAGES.get(ext)
    if spec is None:
        return None
    try:
        import tree_sitter as ts

        grammar = importlib.import_module(spec[0])
    except ImportError:
        return None
    return ts.Parser(ts.Language(grammar.language())), spec[1]


def symbols(path: str, text: str) -> list[Symbol]:
    """The definitions in one file, in source order: at module level and in classes (a
    function's own inner definitions are not part of the outline). One walk of the syntax
    tree that never enters a function's body, so the time grows with the file, not with how
    deeply it nests (asking a tree-sitter node for its parent walks down from the root)."""
    loaded = _language(posixpath.splitext(path)[1])
    if loaded is None or not text:
        return []
    parser, kinds = loaded
    source = text.encode("utf-8")
    found: list[Symbol] = []
    stack: list[tuple[Any, str]] = [(parser.parse(source).root_node, "")]
    while stack:
        node, owner = stack.pop()
        kind = node.type
        if kind in kinds and (symbol := _symbol(path, node, source, owner)) is not None:
            found.append(symbol)
            if kind in _CLASSES:
                stack.extend((child, symbol.name) for child in node.children)
            continue
        if kind in _FUNCTIONS or kind in _CLASSES:
            continue  # an unnamed function or class, or one this language does not outline
        stack.extend((child, owner) for child in node.children)
    return sorted(found, key=lambda s: (s.line, s.end_line))


def _symbol(path: str, node: Any, source: bytes, owner: str) -> Symbol | None:
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return None
    body = node.child_by_field_name("body") or node.child_by_field_name("value")
    if node.type == "variable_declarator" and (
            name_node.type != "identifier" or body is None or body.type not in _FUNCTION_VALUES):
        return None  # a variable, not a function
    name = _text(name_node, source)
    kind = "class" if node.type in _CLASSES else ("method" if owner else "function")
    end = body.start_byte if body is not None and body.start_byte > node.start_byte else node.end_byte
    head = " ".join(source[node.start_byte:end].decode("utf-8", "replace").split())
    head = head.rstrip(":{ ").removesuffix("=>").rstrip()
    if node.type == "variable_declarator" and body is not None:
        head = f"{name} = " + " ".join(_params(body, source).split())
    return Symbol(path=path, name=name, kind=kind, line=node.start_point[0] + 1,
                  end_line=node.end_point[0] + 1, signature=head[:MAX_SIGNATURE], parent=owner)


def _params(fn: Any, source: bytes) -> str:
    params = fn.child_by_field_name("parameters") or fn.child_by_field_name("parameter")
    shown = _text(params, source) if params is not None else "()"
    return f"{shown} =>" if fn.type == "arrow_function" else f"function{shown}"


def _text(node: Any, source: bytes) -> str:
    return source[node.start_byte:node.end_byte].decode("utf-8", "replace")


def enclosing(syms: Iterable[Symbol], line: int) -> Symbol | None:
    """The innermost definition whose lines contain ``line``."""
    around = [s for s in syms if s.line <= line <= s.end_line]
    return min(around, key=lambda s: s.end_line - s.line) if around else None


def render_map(files: Mapping[str, str], *, limit: int = 2000) -> str:
    """``files`` (path -> text) as an indented outline, one symbol a line, within ``limit``
    characters; files without symbols are named alone."""
    out: list[str] = []
    for path, text in files.items():
        syms = symbols(path, text)
        lines = [path] + [
            f"{'    ' if s.parent else '  '}{s.signature}  [{s.line}-{s.end_line}]" for s in syms
        ]
        out.extend(lines)
    text = "\n".join(out)
    if len(text) <= limit:
        return text
    return text[: limit - 30].rsplit("\n", 1)[0] + "\n... (map cut)"
