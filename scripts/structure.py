#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Structure checks of rroce's kernel sources (Documentation/architecture.rst).

  structure.py          check and exit 1 naming every violation
  structure.py --graph  print the module import graph (one line per module)

Checks:
  - no file under src/ is over 900 lines (generated bindings and test vectors
    excepted), no function over 120 lines;
  - the module graph (top-level modules of the crate, from `crate::` paths)
    has no cycle once the edges from `dev` to the object modules whose tables
    it holds are set aside;
  - the arrows named in the architecture page: nothing but the crate root
    names `link`, nothing but `link` names `verbs` (tests aside); `cq` never names `qp`; `net` never names `qp`,
    `transport` or `recv` except `net` handing packets to `recv`; `engine`
    names nothing outside itself.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MAX_FILE = 900
MAX_FN = 120
EXEMPT_FILES = {"engine/icrc_rxe_vectors.rs", "rdma/bindings_generated.rs"}
# Object modules whose tables the device holds: dev <-> these is allowed.
DEV_TABLES = {"qp", "cq", "mr", "mw", "ah", "table", "counters"}
FN = re.compile(r'^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(unsafe\s+)?(extern "C"\s+)?fn\s+(\w+)')


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


def functions(path):
    lines = path.read_text().split("\n")
    out = []
    for i, l in enumerate(lines):
        m = FN.match(l)
        if not m:
            continue
        depth, started = 0, False
        for k in range(i, len(lines)):
            s = strip(lines[k])
            if ";" in s and not started and "{" not in s:
                break
            depth += s.count("{") - s.count("}")
            if "{" in s:
                started = True
            if started and depth <= 0:
                out.append((m.group(7), i + 1, k - i + 1))
                break
    return out


# Directory modules whose files are separate layers: `net` holds the
# receive side (sockets, below `recv`) and the send side (skbs, below the
# transport), so its files are nodes of their own.
SPLIT = {"net"}
ITEM_DEF = r"^\s*(pub(\([^)]*\))?\s+)?(unsafe\s+)?(extern \"C\"\s+)?(fn|struct|enum|const|static|trait|type|mod)\s+{}\b"


def module_of(path):
    rel = path.relative_to(SRC)
    if len(rel.parts) == 1:
        stem = rel.stem
        return None if stem == "rroce_main" else stem
    if rel.parts[0] in SPLIT and rel.stem != "mod":
        return f"{rel.parts[0]}/{rel.stem}"
    return rel.parts[0]


def expand_use(tree, prefix=""):
    """Full paths of a use tree (the text after `use `, without `;`)."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        return [prefix + tree.split(" as ")[0].strip()]
    head, body = tree[:i], tree[i + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "{") - (ch == "}")
        cur += ch
    parts.append(cur)
    out = []
    for part in parts:
        if part.strip():
            out += expand_use(part, prefix + head)
    return out


def resolve(path):
    """The node a `crate::...` path names, or None."""
    segs = [s for s in path.split("::") if s]
    if not segs or segs[0] != "crate" or len(segs) < 2:
        return None
    top = segs[1]
    if (SRC / f"{top}.rs").exists():
        return top
    if not (SRC / top).is_dir():
        return None
    if top not in SPLIT:
        return top
    if len(segs) > 2:
        child = SRC / top / f"{segs[2]}.rs"
        if child.exists():
            return f"{top}/{segs[2]}"
        for c in sorted((SRC / top).glob("*.rs")):
            if c.stem != "mod" and re.search(ITEM_DEF.format(re.escape(segs[2])), c.read_text(), re.M):
                return f"{top}/{c.stem}"
    return top


def graph():
    edges = {}
    for f in sorted(SRC.rglob("*.rs")):
        mod = module_of(f)
        if mod is None:
            continue
        text = "\n".join(strip(l) for l in f.read_text().split("\n"))
        paths = []
        for m in re.finditer(r"\buse\s+(crate::[^;]*);", text, re.S):
            paths += expand_use(m.group(1))
        text_nouse = re.sub(r"\buse\s+crate::[^;]*;", "", text, flags=re.S)
        paths += re.findall(r"\bcrate(?:::\w+)+", text_nouse)
        targets = {resolve(p) for p in paths} - {None}
        top = mod.split("/")[0]
        targets = {t for t in targets if t.split("/")[0] != top or (top in SPLIT and t != mod and "/" in t and "/" in mod)}
        targets.discard(mod)
        edges.setdefault(mod, set()).update(targets)
    # A split directory's mod.rs re-exports its files: naming the directory
    # itself names all of them.
    for top in SPLIT:
        if (SRC / top).is_dir():
            kids = {f"{top}/{c.stem}" for c in (SRC / top).glob("*.rs") if c.stem != "mod"}
            edges.setdefault(top, set()).update(kids)
    return edges


def cycles(edges):
    e = {m: {n for n in ns if not (m == "dev" and n in DEV_TABLES)} for m, ns in edges.items()}
    found, state, stack = [], {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(e.get(m, ())):
            if state.get(n) == 1:
                found.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(e):
        if m not in state:
            visit(m)
    return found


def main():
    edges = graph()
    if sys.argv[1:] == ["--graph"]:
        for m in sorted(edges):
            print(f"{m:12} -> {' '.join(sorted(edges[m]))}")
        return 0
    bad = []
    for f in sorted(SRC.rglob("*.rs")):
        rel = str(f.relative_to(SRC))
        if rel in EXEMPT_FILES:
            continue
        n = len(f.read_text().split("\n")) - 1
        if n > MAX_FILE:
            bad.append(f"src/{rel}: {n} lines (limit {MAX_FILE})")
        for name, line, length in functions(f):
            if length > MAX_FN:
                bad.append(f"src/{rel}:{line}: fn {name} is {length} lines (limit {MAX_FN})")
    for c in cycles(edges):
        bad.append("module cycle: " + " -> ".join(c))
    for m, ns in edges.items():
        if m == "test":
            continue
        if "link" in ns:
            bad.append(f"{m} names link (only the crate root may)")
        if "verbs" in ns and m != "link":
            bad.append(f"{m} names verbs (only link may, for the ops table)")
        if m == "engine" and ns:
            bad.append(f"engine names {' '.join(sorted(ns))} (it must stay pure)")
    if "qp" in edges.get("cq", set()):
        bad.append("cq names qp (an overrun calls a hook instead)")
    for m, ns in edges.items():
        if m.split("/")[0] == "net" and ns & {"qp", "transport"}:
            bad.append(f"{m} names {' '.join(sorted(ns & {'qp', 'transport'}))} (received packets go to recv)")
    for b in bad:
        print(f"structure: {b}")
    if not bad:
        print("structure: file and function sizes within limits, module graph without cycles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
