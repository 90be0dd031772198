#!/usr/bin/env python3
"""Writes blocks of every weight type strata decodes, as llama.cpp's ggml quantizes and
dequantizes them, for tests/test_unit_quants.cpp (tests/data/ggml_blocks.bin).

    python3 bench/llamacpp/ggml_blocks.py LIBGGML_BASE_SO OUT

LIBGGML_BASE_SO is libggml-base.so of llama.cpp v0.5.0 (built outside the repository, see
../shared/vocab/README.md). For each type: rows of gaussian values at three magnitudes
quantized by ggml_quantize_chunk (the lattice types with a flat importance matrix), and rows of random bytes (any bit pattern a file may hold),
each with ggml's dequantize_row_<type> of it. File layout (little-endian): b"SGBK", u32 count,
then per entry u32 type, u32 values, u32 bytes, the blocks, the values as f32.
"""
import ctypes
import random
import struct
import sys

TYPES = {  # GGUF id: (name, block values, block bytes)
    3: ("q4_1", 32, 20), 6: ("q5_0", 32, 22), 7: ("q5_1", 32, 24), 20: ("iq4_nl", 32, 18),
    23: ("iq4_xs", 256, 136), 39: ("mxfp4", 32, 17), 34: ("tq1_0", 256, 54),
    35: ("tq2_0", 256, 66), 41: ("q1_0", 128, 18), 42: ("q2_0", 64, 18),
    16: ("iq2_xxs", 256, 66), 17: ("iq2_xs", 256, 74), 22: ("iq2_s", 256, 82),
    18: ("iq3_xxs", 256, 98), 21: ("iq3_s", 256, 110), 19: ("iq1_s", 256, 50),
    29: ("iq1_m", 256, 56), 40: ("nvfp4", 64, 36),
}
# The lattice types' quantizers need an importance matrix (ggml_quantize_requires_imatrix):
# they get one of ones, which weighs every column alike.
NEEDS_IMATRIX = {16, 17, 22, 18, 21, 19, 29}


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p]
    rng = random.Random(54)
    entries = []
    n = 512
    for tid, (name, block, nbytes) in TYPES.items():
        lib.ggml_quantize_init(tid)
        deq = getattr(lib, "dequantize_row_" + name)
        deq.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        rows = []
        for scale in (1e-6, 0.02, 30.0):
            x = (ctypes.c_float * n)(*[rng.gauss(0, scale) for _ in range(n)])
            dst = ctypes.create_string_buffer(n // block * nbytes)
            imatrix = (ctypes.c_float * n)(*([1.0] * n)) if tid in NEEDS_IMATRIX else None
            lib.ggml_quantize_chunk(tid, x, dst, 0, 1, n, imatrix)
            rows.append(dst.raw)
        rows.append(bytes(rng.getrandbits(8) for _ in range(n // block * nbytes)))
        for raw in rows:
            src = ctypes.create_string_buffer(raw, len(raw))
            out = (ctypes.c_float * n)()
            deq(src, out, n)
            entries.append(struct.pack("<III", tid, n, len(raw)) + raw +
                           struct.pack("<%dI" % n, *struct.unpack("<%dI" % n, bytes(out))))
    with open(sys.argv[2], "wb") as f:
        f.write(b"SGBK" + struct.pack("<I", len(entries)) + b"".join(entries))


if __name__ == "__main__":
    main()
