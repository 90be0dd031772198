#!/usr/bin/env python3
"""Functions longer than a limit (default 100 lines) in a source tree, longest first: each
definition that starts at column 0 counted from its first line to the brace that closes it.

    scripts/long_functions.py [SRC_DIR] [--over N]
"""
import os
import re
import sys


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def long_functions(root, limit):
    found = []
    for d, _, files in os.walk(root):
        for name in files:
            if not name.endswith((".cpp", ".cu", ".h", ".inc")):
                continue
            path = os.path.join(d, name)
            with open(path, errors="replace") as f:
                lines = f.read().split("\n")
            depth, start, head = 0, None, ""
            for i, raw in enumerate(lines):
                s = strip(raw)
                if s.startswith("namespace") or re.match(r"^\}\s*//\s*namespace", raw):
                    continue
                if (depth == 0 and start is None and re.match(r"^[A-Za-z~]", s) and "(" in s
                        and not s.startswith(("struct", "class", "enum", "using", "typedef",
                                              "#", "template"))):
                    start, head = i, s.strip()
                if start is None:
                    continue
                opens, closes = s.count("{"), s.count("}")
                depth += opens - closes
                if depth <= 0 and (opens or closes):
                    if i - start + 1 > limit:
                        found.append((i - start + 1, os.path.relpath(path, root), head[:80]))
                    start, depth = None, 0
                elif depth <= 0 and s.rstrip().endswith(";"):
                    start, depth = None, 0
    return sorted(found, reverse=True)


def main():
    args = sys.argv[1:]
    limit = 100
    if "--over" in args:
        at = args.index("--over")
        limit = int(args[at + 1])
        del args[at:at + 2]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    for n, path, head in long_functions(root, limit):
        print(f"{n:5d}  {path}: {head}")


if __name__ == "__main__":
    main()
