#!/usr/bin/env python3
"""Writes the lattice grids of llama.cpp's IQ types as strata's compact code tables
(src/tensor/iq_grids/*.inc), from ggml-common.h of llama.cpp v0.5.0:

    python3 bench/llamacpp/iq_grids.py LLAMA_CPP/ggml/src/ggml-common.h src/tensor/iq_grids

A grid entry is 8 (IQ2, IQ1) or 4 (IQ3) bytes drawn from a few levels; each entry is written as
the levels' indices, 2 bits (IQ2: 8, 25, 43; IQ1: -1, 0, 1) or 3 bits (IQ3) per byte from the
low bits up, so a table is one uint16 per entry. tensor/iq_grids.h expands them and
tests/test_unit_quants.cpp checks the expansion against ggml's dequantization of real blocks.
"""
import re
import sys

GRIDS = {  # ggml name: (file, bytes per entry, levels as unsigned bytes)
    "iq2xxs_grid": ("iq2xxs", 8, [8, 25, 43]),
    "iq2xs_grid": ("iq2xs", 8, [8, 25, 43]),
    "iq2s_grid": ("iq2s", 8, [8, 25, 43]),
    "iq1s_grid": ("iq1s", 8, [0xFF, 0, 1]),
    "iq3xxs_grid": ("iq3xxs", 4, [4, 12, 20, 28, 36, 44, 52, 62]),
    "iq3s_grid": ("iq3s", 4, [1, 3, 5, 7, 9, 11, 13, 15]),
}


def table(text, name):
    m = re.search(r"GGML_TABLE_BEGIN\(\w+, %s, \w+\)(.*?)GGML_TABLE_END" % name, text, re.S)
    return [int(v, 16) for v in re.findall(r"0x[0-9a-fA-F]+", m.group(1))]


def main():
    text = open(sys.argv[1]).read()
    for name, (out, width, levels) in GRIDS.items():
        bits = 2 if len(levels) <= 4 else 3
        codes = []
        for entry in table(text, name):
            code = 0
            for j in range(width):
                code |= levels.index((entry >> (8 * j)) & 0xFF) << (bits * j)
            codes.append(code)
        lines = ["// %d entries of ggml's %s (llama.cpp v0.5.0), written by bench/llamacpp/"
                 "iq_grids.py." % (len(codes), name)]
        for i in range(0, len(codes), 12):
            lines.append(" ".join("0x%04x," % c for c in codes[i:i + 12]))
        with open("%s/%s.inc" % (sys.argv[2], out), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
