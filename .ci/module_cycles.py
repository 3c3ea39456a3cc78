#!/usr/bin/env python3
"""Checks that the top-level modules of a crate depend on each other without cycles.

Reads every `crate::module` reference of the crate's non-test code (a `use crate::{a::x, b}`
block names a and b) and reports each strongly connected component of more than one module.
Usage: module_cycles.py crates/agentloop-core/src   (exit 1 when there is a cycle)
"""
import re
import sys
from pathlib import Path


def non_test(text: str) -> str:
    # A file's unit tests come last, after `#[cfg(test)]`.
    cut = re.search(r"^#\[cfg\(test\)\]", text, re.M)
    return text[: cut.start()] if cut else text


def referenced(text: str) -> set[str]:
    names = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text))
    for block in re.findall(r"\buse crate::\{(.*?)\};", text, re.S):
        depth, item = 0, ""
        for char in block + ",":
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            if char == "," and depth == 0:
                head = item.strip().split("::")[0].strip()
                if re.fullmatch(r"[a-z_][a-z0-9_]*", head):
                    names.add(head)
                item = ""
            else:
                item += char
    return names


def module_of(root: Path, path: Path) -> str:
    relative = path.relative_to(root)
    first = relative.parts[0]
    return first[:-3] if first.endswith(".rs") else first


def main() -> int:
    root = Path(sys.argv[1])
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.rs")):
        if "tests" in path.relative_to(root).parts[:-1]:
            continue
        module = module_of(root, path)
        if module in ("lib", "main"):
            continue
        uses = referenced(non_test(path.read_text()))
        edges.setdefault(module, set()).update(u for u in uses if u != module)
    modules = set(edges)
    for targets in edges.values():
        targets &= modules
    # Tarjan's strongly connected components.
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
    for component in found:
        inner = [f"{a} -> {b}" for a in component for b in sorted(edges[a]) if b in component]
        print(f"cycle among {', '.join(component)}: {'; '.join(inner)}")
    if not found:
        print(f"{root}: {len(edges)} modules, no cycle")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
