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

# extension -> (grammar module, definitions query)
_PY_QUERY = "(class_definition) @def (function_definition) @def"
_JS_QUERY = """
(class_declaration) @def (function_declaration) @def (method_definition) @def
(generator_function_declaration) @def
(variable_declarator name: (identifier) value: [(arrow_function) (function_expression)]) @def
"""
_SH_QUERY = "(function_definition) @def"
LANGUAGES: dict[str, tuple[str, str]] = {
    ".py": ("tree_sitter_python", _PY_QUERY),
    ".js": ("tree_sitter_javascript", _JS_QUERY),
    ".mjs": ("tree_sitter_javascript", _JS_QUERY),
    ".cjs": ("tree_sitter_javascript", _JS_QUERY),
    ".sh": ("tree_sitter_bash", _SH_QUERY),
    ".bash": ("tree_sitter_bash", _SH_QUERY),
}
_CONTAINERS = {"class_definition", "class_declaration", "class_body", "block"}
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
def _language(ext: str) -> tuple[Any, Any] | None:
    """(parser, query) for an extension; None when its grammar package is not installed."""
    spec = LANGUAGES.get(ext)
    if spec is None:
        return None
    try:
        import tree_sitter as ts

        grammar = importlib.import_module(spec[0])
    except ImportError:
        return None
    language = ts.Language(grammar.language())
    return ts.Parser(language), ts.Query(language, spec[1])


def symbols(path: str, text: str) -> list[Symbol]:
    """The definitions in one file, in source order."""
    loaded = _language(posixpath.splitext(path)[1])
    if loaded is None or not text:
        return []
    import tree_sitter as ts

    parser, query = loaded
    source = text.encode("utf-8")
    tree = parser.parse(source)
    nodes = [n for _, caps in ts.QueryCursor(query).matches(tree.root_node) for n in caps["def"]]
    found = [_symbol(path, node, source) for node in sorted(nodes, key=lambda n: n.start_byte)]
    return [s for s in found if s is not None]


def _symbol(path: str, node: Any, source: bytes) -> Symbol | None:
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return None
    name = _text(name_node, source)
    parent = _enclosing_class(node, source)
    if parent is None:
        return None  # a function inside a function: not part of the file's outline
    kind = "class" if "class" in node.type else ("method" if parent else "function")
    body = node.child_by_field_name("body") or node.child_by_field_name("value")
    end = body.start_byte if body is not None and body.start_byte > node.start_byte else node.end_byte
    head = " ".join(source[node.start_byte:end].decode("utf-8", "replace").split())
    head = head.rstrip(":{ ").removesuffix("=>").rstrip()
    if node.type == "variable_declarator" and body is not None:
        head = f"{name} = " + " ".join(_params(body, source).split())
    return Symbol(path=path, name=name, kind=kind, line=node.start_point[0] + 1,
                  end_line=node.end_point[0] + 1, signature=head[:MAX_SIGNATURE], parent=parent)


def _params(fn: Any, source: bytes) -> str:
    params = fn.child_by_field_name("parameters") or fn.child_by_field_name("parameter")
    shown = _text(params, source) if params is not None else "()"
    return f"{shown} =>" if fn.type == "arrow_function" else f"function{shown}"


def _enclosing_class(node: Any, source: bytes) -> str | None:
    """The class a definition belongs to, "" at module level, None inside a function."""
    parent = node.parent
    while parent is not None:
        if parent.type in ("class_definition", "class_declaration"):
            name = parent.child_by_field_name("name")
            return _text(name, source) if name is not None else ""
        if parent.type in ("function_definition", "function_declaration", "method_definition",
                           "arrow_function", "function_expression", "function"):
            return None
        parent = parent.parent
    return ""


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
