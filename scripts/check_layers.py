#!/usr/bin/python3
"""Checks the layer rules of docs/architecture.md against the code: a file in src/strata/<layer>/
may include only its own layer and the layers its row of the table lists ("may include").

    scripts/check_layers.py [REPO]      exit 0: every include follows the table; 1: lists those that don't

The table is the single statement of the rules: change the doc and this check follows it. A row's
note in parentheses limits a dependency to some files: `data (`input.h` only)` lets only
distribute/input.h and input.cc include data. A row may name a sub-folder (`backend/cpu`): its
files follow that row, and other layers reach it only if their row names it. The doc's list of
known exceptions ("- `FILE`, `FILE` include(s) `LAYER`") is allowed, and only it: an exception
that no longer happens must leave the list too.
"""
import pathlib
import re
import sys

repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
doc = (repo / "docs/architecture.md").read_text()

# | `layer` | owns | may include |
rules = {}
for line in doc.splitlines():
    m = re.match(r"^\|\s*`([a-z_/]+)`\s*\|[^|]*\|([^|]*)\|\s*$", line)
    if not m:
        continue
    allowed = {}  # layer -> None (any file) or a set of file stems allowed to include it
    for part in re.split(r"[,;]", m.group(2)):
        part = part.strip()
        dep = re.match(r"^([a-z_]+)(?:\s*\((.*)\))?$", part)
        if not dep:
            continue
        only = re.findall(r"`([^`]+)`", dep.group(2) or "")
        allowed[dep.group(1)] = {pathlib.Path(o).stem for o in only} if only else None
    rules[m.group(1)] = allowed

if not rules:
    sys.exit("check_layers: no layer table found in docs/architecture.md")

# "- `src/strata/x/y.cc`, `src/strata/x/z.h` include `layer` (why)" under "Known exceptions".
exceptions = set()
known = doc.split("### Known exceptions", 1)[1] if "### Known exceptions" in doc else ""
for line in known.split("\n## ", 1)[0].splitlines():
    m = re.match(r"^- (.*?) includes? `([a-z_/]+)`", line)
    if m:
        for f in re.findall(r"`([^`]+)`", m.group(1)):
            exceptions.add((f, m.group(2)))
used = set()


def layer_of(rel_parts):
    """The row a file or include path follows: the longest folder prefix that has a row."""
    if len(rel_parts) > 2 and "/".join(rel_parts[:2]) in rules:
        return "/".join(rel_parts[:2])
    return rel_parts[0]


src = repo / "src/strata"
bad = []
for path in sorted(src.rglob("*")):
    if path.suffix not in (".h", ".cc", ".inc") or not path.is_file():
        continue
    layer = layer_of(path.relative_to(src).parts)
    rel = str(path.relative_to(repo))
    if layer not in rules:
        bad.append(f"{rel}: layer '{layer}' has no row in docs/architecture.md")
        continue
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = re.match(r'^\s*#\s*include\s+"strata/([^"]+)"', line)
        if not m:
            continue
        dep = layer_of(m.group(1).split("/"))
        if dep == layer or (layer.startswith(dep + "/")):  # own layer, or a sub-folder's parent
            continue
        if (rel, dep) in exceptions:
            used.add((rel, dep))
            continue
        if dep not in rules[layer]:
            bad.append(f"{rel}:{n}: {layer} includes {dep} ({line.strip()})")
        elif rules[layer][dep] is not None and path.stem not in rules[layer][dep]:
            bad.append(f"{rel}:{n}: only {sorted(rules[layer][dep])} of {layer} may include {dep}")
for f, dep in sorted(exceptions - used):
    bad.append(f"{f}: listed as an exception that includes {dep}, but it no longer does: drop it from the list")

if bad:
    print("includes that break docs/architecture.md's layer rules:")
    print("\n".join("  " + b for b in bad))
    sys.exit(1)
print(f"check_layers: {len(rules)} layers, every include follows docs/architecture.md "
      f"({len(exceptions)} known exceptions)")
