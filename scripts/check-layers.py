#!/usr/bin/env python3
"""Two rules of core's shape (docs/architecture.md, "Map" and "Adding a family"), checked from the
sources:
  - core's folders form layers: no folder of core/ includes, through any chain of folders, a header
    of a folder that includes its own. Every cycle is printed with one include per edge.
  - a model family lives in its folder: outside core/model/<family>/ and the two lists
    (core/model/model_families.cpp, core/model/make_model.cpp), no file of core/ or hosts/ includes
    a family's header or compares an arch with a quoted name. Each such line is printed.
Exits 1 when either rule is broken.

Usage: python3 scripts/check-layers.py [REPOSITORY]   (default: this script's repository)
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
include = re.compile(r'^\s*#\s*include\s+"core/([a-z_]+)/')


def folder_of(path):
    parts = path.relative_to(root / "core").parts
    return parts[0] if len(parts) > 1 else None


edges = {}  # folder -> {folder it includes: "file:line" of one such include}
for path in sorted((root / "core").rglob("*")):
    if path.suffix not in (".hpp", ".cpp", ".cu", ".cuh"):
        continue
    source = folder_of(path)
    if source is None:
        continue
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        match = include.match(line)
        if match and match.group(1) != source:
            edges.setdefault(source, {}).setdefault(match.group(1), f"{path.relative_to(root)}:{number}")

# Every cycle, as the strongly connected components of more than one folder (Tarjan's algorithm).
index, low, on_stack, stack, components = {}, {}, set(), [], []


def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in edges.get(node, {}):
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
            components.append(sorted(component))


for folder in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
    if folder not in index:
        visit(folder)

for component in components:
    print("include cycle between core/" + ", core/".join(component) + ":")
    for source in component:
        for target, where in sorted(edges.get(source, {}).items()):
            if target in component:
                print(f"  {source} -> {target}  ({where})")
if not components:
    print(f"core's {len(index)} folders form layers: no include cycle between them")

# The families: their folders are those under core/model/ that hold a <name>_family.cpp.
model = root / "core" / "model"
families = sorted(p.parent.name for p in model.glob("*/*_family.cpp") if p.parent.name == p.stem[: -len("_family")])
lists = {model / "model_families.cpp", model / "make_model.cpp"}
family_include = re.compile(r'^\s*#\s*include\s+"core/model/(' + "|".join(families) + r')/')
arch_compare = re.compile(r'arch(\(\))?\s*[!=]=\s*"|"\w+"\s*[!=]=\s*[\w.>-]*arch\b')
outside = []
for folder in ("core", "hosts"):
    for path in sorted((root / folder).rglob("*")):
        if path.suffix not in (".hpp", ".cpp", ".cu", ".cuh") or path in lists:
            continue
        if path.parent.parent == model and path.parent.name in families:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("//")[0]
            if family_include.match(code) or arch_compare.search(code):
                outside.append(f"  {path.relative_to(root)}:{number}: {line.strip()}")
if outside:
    print(f"family knowledge outside core/model/<family>/ ({', '.join(families)}) and the two lists:")
    print("\n".join(outside))
else:
    print(f"the {len(families)} families ({', '.join(families)}) are known only in their folders and the two lists")
sys.exit(1 if components or outside else 0)
