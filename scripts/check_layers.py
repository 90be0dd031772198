#!/usr/bin/env python3
"""The layering rule of docs/ARCHITECTURE.md, checked: every #include "dir/..." in src/ names a
layer listed before the including file's own (or its own directory); layers of one rank
(planning and generation; offline and chat) never include each other; the CUDA backend's
headers (backends/cuda/) are included only inside backends/cuda/ (the rest reach a GPU through
backends/registry.h). Prints each offending line and exits 1; 0 when the tree keeps the rule.

    scripts/check_layers.py [SRC_DIR]        (default: src/ beside this script)
"""
import os
import re
import sys

# The layers in order; one rank may hold several directories that must not use each other.
RANKS = [
    ["core"], ["tensor"], ["format"], ["backends"], ["tiers"], ["model"], ["placement"],
    ["runtime"], ["planning", "generation"], ["offline", "chat"], ["engine"], ["server"],
    ["cli"],
]
RANK = {d: i for i, ds in enumerate(RANKS) for d in ds}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"')
SOURCES = (".h", ".cpp", ".cu", ".cuh", ".inc", ".in")


def violations(src):
    found = []
    for root, _, files in os.walk(src):
        rel_dir = os.path.relpath(root, src)
        layer = rel_dir.split(os.sep)[0]
        if layer not in RANK:
            if rel_dir != ".":
                found.append(f"{rel_dir}/: a directory that is no layer (add it to RANKS and "
                             "docs/ARCHITECTURE.md)")
            continue
        in_cuda = rel_dir.replace(os.sep, "/").startswith("backends/cuda")
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target, rest = m.group(1), m.group(2)
                    where = f"{os.path.relpath(path, src)}:{n}: includes {target}/{rest}"
                    if target not in RANK:
                        continue  # a generated or system header in quotes
                    if target == "backends" and rest.startswith("cuda/") and not in_cuda:
                        found.append(f"{where}: the CUDA backend is reached through "
                                     "backends/registry.h outside backends/cuda/")
                    elif target != layer and RANK[target] > RANK[layer]:
                        found.append(f"{where}: {layer}/ may not use the later layer {target}/")
                    elif target != layer and RANK[target] == RANK[layer]:
                        found.append(f"{where}: {layer}/ and {target}/ are siblings and may "
                                     "not use each other")
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "src")
    if not os.path.isdir(src):
        print(f"check_layers: '{src}' is not a directory", file=sys.stderr)
        return 2
    found = violations(src)
    for v in found:
        print(v)
    if found:
        print(f"check_layers: {len(found)} include(s) break the layering "
              "(docs/ARCHITECTURE.md)", file=sys.stderr)
        return 1
    print("check_layers: every include keeps the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
