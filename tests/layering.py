"""What the layering tests share: every module a source file imports, read with ``ast`` (imports
inside functions and ``TYPE_CHECKING`` blocks too, relative ones made absolute)."""

from __future__ import annotations

import ast


def imported(source: str, package: str) -> list[tuple[int, str]]:
    """Every module ``source`` (a module of ``package``) imports, absolute, with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def offending(source: str, package: str, prefixes: tuple[str, ...]) -> list[tuple[int, str]]:
    return [(line, name) for line, name in imported(source, package)
            if any(name == p or name.startswith(p + ".") for p in prefixes)]
