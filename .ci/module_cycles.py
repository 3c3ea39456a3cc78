#!/usr/bin/env python3
"""Checks that the modules of a crate depend on each other without cycles, at every level.

For each module, its child modules must not import each other in a circle: the top-level
modules of the crate, the submodules of `machine`, of `machine::x`, and so on. A child's
imports count with those of its own descendants (`machine/planning/plan.rs` importing
`super::super::review` is `planning -> review` among the children of `machine`).

Reads every path of the crate's non-test code that starts with `crate::`, `super::` or
`self::` (in `use` trees, expanded, and inline in expressions) and resolves it against the
module of the file it is in. Reports each strongly connected component of more than one
sibling module.

Usage: module_cycles.py CRATE_SRC...   (e.g. crates/agentloop-core/src; exit 1 on a cycle)
"""
import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def non_test(text: str) -> str:
    # A file's unit tests come last, after `#[cfg(test)]`.
    cut = re.search(r"^#\[cfg\(test\)\]", text, re.M)
    text = text[: cut.start()] if cut else text
    # Comments may name paths that the code does not import.
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\bas\b.*$", "", tree)]
    prefix, body = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, item = [], 0, ""
    for char in body + ",":
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if char == "," and depth == 0:
            if item:
                parts.append(item)
            item = ""
        else:
            item += char
    paths = []
    for part in parts:
        for inner in expand_use_tree(part):
            paths.append(prefix + inner if inner != "self" else prefix.rstrip(":"))
    return paths


def referenced_paths(text: str) -> list[str]:
    paths = []
    # `use` trees (spaces removed first: `use crate::{a, b}` may span lines).
    for tree in re.findall(r"\buse\s+((?:crate|super|self)\b[^;]*);", text):
        paths.extend(expand_use_tree(re.sub(r"\s+as\s+" + IDENT, "", tree)))
    text = re.sub(r"\buse\s+(?:crate|super|self)\b[^;]*;", "", text)
    # Inline paths: `crate::a::b(...)`, `super::super::x::Y`.
    for match in re.finditer(r"\b(?:crate|super|self)(?:::" + IDENT + ")+", text):
        paths.append(match.group(0))
    return paths


def resolve(module: list[str], path: str) -> list[str] | None:
    segments = [s for s in path.split("::") if s]
    if not segments:
        return None
    if segments[0] == "crate":
        base, rest = [], segments[1:]
    else:
        base = list(module)
        rest = segments
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                if not base:
                    return None
                base.pop()
            rest = rest[1:]
    return base + rest


def module_path(root: Path, path: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    if parts == ["lib"] or parts == ["main"]:
        return []
    return parts


def is_test_file(module: list[str]) -> bool:
    return any(part == "tests" or part.endswith("_tests") for part in module)


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def check(root: Path) -> int:
    files = {}
    for path in sorted(root.rglob("*.rs")):
        module = module_path(root, path)
        # `#[path]` test files beside their module (`ai_sdk_tests.rs`) and `tests/` folders.
        if is_test_file(module) or (module and module[-1].endswith("_tests")):
            continue
        files[tuple(module)] = non_test(path.read_text())
    modules = set(files)
    # Siblings under each parent: parent -> child -> the children it imports.
    levels: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for module in modules:
        if module:
            levels.setdefault(module[:-1], {}).setdefault(module[-1], set())
    for module, text in files.items():
        for path in referenced_paths(text):
            target = resolve(list(module), path)
            if target is None:
                continue
            common = 0
            while (
                common < len(module) and common < len(target) and module[common] == target[common]
            ):
                common += 1
            if common >= len(module) or common >= len(target):
                continue  # an ancestor or a descendant, not a sibling's subtree
            parent = tuple(module[:common])
            child, other = module[common], target[common]
            if tuple(target[: common + 1]) in modules and child != other:
                levels[parent][child].add(other)
    failures = 0
    for parent in sorted(levels):
        for component in components(levels[parent]):
            failures += 1
            edges = levels[parent]
            inner = [f"{a} -> {b}" for a in component for b in sorted(edges[a]) if b in component]
            where = "::".join(parent) or "the crate root"
            print(f"{root}: cycle among {', '.join(component)} in {where}: {'; '.join(inner)}")
    if not failures:
        print(f"{root}: {len(modules)} modules, no cycle at any level")
    return failures


def main() -> int:
    failures = sum(check(Path(arg)) for arg in sys.argv[1:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
