#!/usr/bin/env python3
"""The module import graph of a Rust crate, drawn from its source: every `use` line and every
path written out in the code (`crate::ops::elu::elu(..)`), file to file.

    python3 scripts/import_graph.py [crates/workbook] [--check] [--dot FILE] [--edges]

Nodes are the crate's files (`layers/gcn_conv.rs` is `layers::gcn_conv`, `layers/mod.rs` is
`layers`); inline modules (`mod tests { .. }`) belong to their file. A path is resolved to the
file that defines the item: the longest module prefix, then through `pub use` re-exports (so
`crate::layers::GraphLayer`, re-exported by `layers/mod.rs`, is an import of the file that
defines it). Comments, doc comments and string literals are skipped, so doc links and message
texts are not imports; test modules are code and count.

The report: the number of files and imports, the depth of the graph (levels: a file that
imports nothing is level 0; otherwise one more than the highest it imports), every import
circle (strongly connected set of files), and, when the crate's top-level doc (src/lib.rs)
declares its layers, every import running back up from a lower layer to a higher one.

The layers are read from a fenced block of the crate doc that starts with the line
`layers (bottom to top):`, one layer a line, `name: module module ...`, the lowest first,
for example

    //! ```text
    //! layers (bottom to top):
    //! base: error limits
    //! placement: ledger placement device
    //! ```

A module listed there stands for its file and every file under it. Every file must belong to
exactly one layer (lib.rs, the crate's face, stands above them all).

`--check` exits 1 on a circle, on an import running up, or on a file in no layer (or two).
Written with the standard library only; the crate's build does not run it. (`cargo modules`
draws the same graph but needs rust-analyzer's crates and a nightly-free toolchain of its own;
this is 300 lines and runs in CI in a second.)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text: str) -> str:
    """`text` with comments, strings and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(IDENT, text[i - 1 : i] or " "):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(path: str, src: str) -> str:
    rel = os.path.relpath(path, src)[: -len(".rs")].replace(os.sep, "::")
    if rel in ("lib", "main"):
        return ""
    if rel.endswith("::mod"):
        rel = rel[: -len("::mod")]
    return rel


def expand_use(tree: str) -> list[tuple[str, str | None]]:
    """`a::{b, c::{d as e}}` to [(a::b, None), (a::c::d, e)]: full paths with their aliases."""
    tree = re.sub(r"\s*(::|,|\{|\})\s*", r"\1", " ".join(tree.split()))

    def parse(s: str, prefix: str) -> list[tuple[str, str | None]]:
        items, depth, start, parts = [], 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for p in parts:
            if not p:
                continue
            brace = p.find("{")
            if brace >= 0:
                head = p[:brace].rstrip(":")
                inner = p[brace + 1 : p.rfind("}")]
                items += parse(inner, f"{prefix}{head}::" if head else prefix)
            else:
                path, _, alias = p.partition(" as ")
                items.append((prefix + path.strip(), alias.strip() or None))
        return items

    return parse(tree, "")


class Crate:
    def __init__(self, root: str):
        self.src = os.path.join(root, "src")
        self.files: dict[str, str] = {}  # module -> stripped text
        self.paths: dict[str, str] = {}  # module -> file path
        for d, _, names in os.walk(self.src):
            for name in sorted(names):
                if name.endswith(".rs"):
                    p = os.path.join(d, name)
                    m = module_of(p, self.src)
                    with open(p, encoding="utf-8") as f:
                        self.files[m] = strip(f.read())
                    self.paths[m] = os.path.relpath(p, self.src)
        # re-exports: (module, name) -> absolute path
        self.reexports: dict[tuple[str, str], str] = {}
        self.uses: dict[str, list[tuple[str, int]]] = defaultdict(list)  # module -> [(abs path, line)]
        self.inline = {m: self._inline_modules(t) for m, t in self.files.items()}
        for m, text in self.files.items():
            self._scan(m, text)

    @staticmethod
    def _inline_modules(text: str) -> list[tuple[int, int, str]]:
        """(start, end, name) of every inline module (`mod tests { .. }`) of a file."""
        out, depth, open_at = [], 0, []
        opens = {mo.end() - 1: mo.group(1) for mo in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", text)}
        for k, ch in enumerate(text):
            if ch == "{":
                depth += 1
                if k in opens:
                    open_at.append((k, depth, opens[k]))
            elif ch == "}":
                if open_at and open_at[-1][1] == depth:
                    start, _, name = open_at.pop()
                    out.append((start, k, name))
                depth -= 1
        return sorted(out)

    def _inline_stack(self, module: str, pos: int) -> list[str]:
        """The inline modules open at `pos` in `module`'s file, outermost first."""
        return [name for start, end, name in self.inline[module] if start < pos < end]

    def _absolute(self, module: str, inline: list[str], path: str) -> str | None:
        """`path` as written in `module` (inside the inline modules `inline`), from the crate root."""
        segs = path.split("::")
        here = (module.split("::") if module else []) + inline
        if segs[0] in ("crate", "workbook"):
            return "::".join(segs[1:])
        if segs[0] == "self":
            return "::".join(here + segs[1:])
        if segs[0] == "super":
            base = list(here)
            while segs and segs[0] == "super":
                if not base:
                    return None
                base.pop()
                segs = segs[1:]
            return "::".join(base + segs)
        return None  # an external crate, a local name, or std

    def _scan(self, module: str, text: str) -> None:
        for mo in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
            public, tree = mo.group(1), mo.group(2)
            inline = self._inline_stack(module, mo.start())
            line = text.count("\n", 0, mo.start()) + 1
            for path, alias in expand_use(tree):
                if path.endswith("::self"):
                    path = path[: -len("::self")]
                absolute = self._absolute(module, inline, path)
                if absolute is None and not inline and path.split("::")[0] in self._children(module):
                    # 2018 paths: `use gcn_conv::GcnConv` in layers/mod.rs names a child module
                    absolute = f"{module}::{path}" if module else path
                if absolute is None:
                    continue
                if public and not inline:
                    name = alias or absolute.split("::")[-1]
                    if name != "*":
                        self.reexports[(module, name)] = absolute
                    else:
                        self.reexports[(module, f"*{absolute}")] = absolute[: -len("::*")]
                self.uses[module].append((absolute, line))
        # paths written out in code: crate::a::b, super::x, self::y, workbook::z
        code = re.sub(r"\b(pub(?:\([^)]*\))?\s+)?use\s+[^;]+;", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        for mo in re.finditer(r"(?<![A-Za-z0-9_:])((?:crate|super|self|workbook)(?:::(?:super|" + IDENT + "))+)", code):
            inline = self._inline_stack(module, mo.start())
            absolute = self._absolute(module, inline, mo.group(1))
            if absolute is not None:
                line = text.count("\n", 0, mo.start()) + 1
                self.uses[module].append((absolute, line))

    def _children(self, module: str) -> set[str]:
        prefix = f"{module}::" if module else ""
        return {m[len(prefix) :].split("::")[0] for m in self.files if m.startswith(prefix) and m != module}

    def resolve(self, path: str, seen: frozenset = frozenset()) -> str | None:
        """The file that defines `path` (an absolute path), through re-exports."""
        if path in seen:
            return None
        segs = path.split("::") if path else []
        for k in range(len(segs), -1, -1):
            m = "::".join(segs[:k])
            if m in self.files:
                rest = segs[k:]
                if rest and (m, rest[0]) in self.reexports:
                    target = self.reexports[(m, rest[0])]
                    return self.resolve("::".join([target] + rest[1:]), seen | {path})
                if rest:
                    for (mm, key), target in self.reexports.items():
                        if mm == m and key.startswith("*"):
                            r = self.resolve("::".join([target] + rest), seen | {path})
                            if r is not None and r != m:
                                return r
                return m if (m or not rest or rest[0] in self._children("")) else None
        return None

    def edges(self) -> dict[str, dict[str, int]]:
        """module -> {imported module: first line}."""
        out: dict[str, dict[str, int]] = {m: {} for m in self.files}
        for m, uses in self.uses.items():
            for path, line in uses:
                target = self.resolve(path)
                if target is None or target == m:
                    continue
                # a module's own face: `pub use` in lib.rs/mod.rs of a child is the parent facing down
                out[m].setdefault(target, line)
        return out


def sccs(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def levels(nodes, edges, comps):
    comp_of = {v: k for k, c in enumerate(comps) for v in c}
    memo = {}

    def level(c):
        if c in memo:
            return memo[c]
        memo[c] = 0
        deps = {comp_of[w] for v in comps[c] for w in edges[v]} - {c}
        memo[c] = 1 + max((level(d) for d in deps), default=-1)
        return memo[c]

    return {v: level(comp_of[v]) for v in nodes}


def declared_layers(lib_text: str) -> list[tuple[str, list[str]]] | None:
    m = re.search(r"//!\s*layers \(bottom to top\):\n((?://![^\n]*\n)+?)//!\s*```", lib_text)
    if not m:
        return None
    layers = []
    for line in m.group(1).splitlines():
        body = line[3:].strip()
        if not body:
            continue
        name, _, mods = body.partition(":")
        layers.append((name.strip(), [x.strip().rstrip("/") for x in mods.split()]))
    return layers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("crate", nargs="?", default="crates/workbook")
    ap.add_argument("--check", action="store_true", help="exit 1 on a circle, an import running up, or a file in no layer")
    ap.add_argument("--edges", action="store_true", help="print every import")
    ap.add_argument("--dot", help="write the graph in Graphviz's dot format")
    args = ap.parse_args()

    crate = Crate(args.crate)
    edges = crate.edges()
    nodes = sorted(crate.files)
    name = lambda m: m or "lib"
    comps = sccs(nodes, edges)
    lv = levels(nodes, edges, comps)
    n_edges = sum(len(v) for v in edges.values())
    print(f"{len(nodes)} files, {n_edges} imports between them, {max(lv.values()) + 1} levels")

    problems = 0
    circles = [c for c in comps if len(c) > 1]
    for c in circles:
        pairs = sorted({tuple(sorted((a, b))) for a in c for b in edges[a] if b in c and a in edges[b]})
        print(f"import circle of {len(c)} files: {', '.join(map(name, c))}")
        for a, b in pairs:
            print(f"  two-file loop: {name(a)} ({crate.paths[a]}:{edges[a][b]}) <-> {name(b)} ({crate.paths[b]}:{edges[b][a]})")
        problems += 1
    if not circles:
        print("no import circle")

    with open(os.path.join(crate.src, "lib.rs"), encoding="utf-8") as f:
        layers = declared_layers(f.read())
    if layers is None:
        print("no layer table in src/lib.rs's doc ('layers (bottom to top):'): nothing to check for imports running up")
    else:
        rank: dict[str, int] = {}
        for m in nodes:
            if m == "":
                continue
            owners = [k for k, (_, mods) in enumerate(layers) for x in mods if m == x or m.startswith(x + "::")]
            if len(owners) != 1:
                print(f"{crate.paths[m]} is in {'no layer' if not owners else 'two layers'} of src/lib.rs's table")
                problems += 1
                continue
            rank[m] = owners[0]
        listed = {x for _, mods in layers for x in mods}
        for x in sorted(listed - set(nodes)):
            print(f"src/lib.rs's table lists '{x}', which is no module of the crate")
            problems += 1
        rank[""] = len(layers)
        up = []
        for a in nodes:
            for b, line in sorted(edges[a].items()):
                if a in rank and b in rank and rank[b] > rank[a]:
                    up.append(f"  {crate.paths[a]}:{line}: {name(a)} ({layers[rank[a]][0]}) imports {name(b)} ({layers[rank[b]][0]})")
        print(f"{len(layers)} layers declared; {len(up)} import(s) running up")
        for u in up:
            print(u)
        problems += len(up)
        for k, (lname, mods) in enumerate(layers):
            print(f"  {k}: {lname}: {' '.join(mods)}")

    if args.edges:
        for a in nodes:
            for b, line in sorted(edges[a].items()):
                print(f"{name(a)} -> {name(b)}  ({crate.paths[a]}:{line})")
    if args.dot:
        with open(args.dot, "w") as f:
            f.write("digraph imports {\n  rankdir=BT;\n")
            for a in nodes:
                for b in sorted(edges[a]):
                    f.write(f'  "{name(a)}" -> "{name(b)}";\n')
            f.write("}\n")
    if args.check and problems:
        print(f"FAILED: {problems} problem(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
