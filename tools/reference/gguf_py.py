"""A small, independent GGUF reader and writer in Python (numpy), written from the GGUF spec.
Used by the PyTorch reference forward pass and by the fixture generators; it shares no code
with strata's C++ reader."""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
# value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
           BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# tensor types: id -> (name, block elements, block bytes)
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 8: ("Q8_0", 32, 34),
         10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
         13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
         30: ("BF16", 1, 2)}


# K-quant super-blocks (256 values), decoded from GGUF's layout description. Each function takes
# the raw blocks as a [n, block_bytes] uint8 array and returns [n, 256] float32 values.
def _f16(b):
    return b.copy().view(np.float16).astype(np.float32).reshape(-1, 1)


def _spread_2bit(qs):
    """qs [n, 64]: value 128*h + 32*j + l is bits 2j..2j+1 of qs[32*h + l]."""
    n = qs.shape[0]
    halves = qs.reshape(n, 2, 1, 32)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    return ((halves >> shifts) & 3).reshape(n, 256).astype(np.int32)


def _k4_scales_mins(sc):
    """12 bytes -> eight 6-bit scales and eight 6-bit mins (Q4_K, Q5_K)."""
    sc = sc.astype(np.int32)
    scales = np.empty((sc.shape[0], 8), dtype=np.int32)
    mins = np.empty_like(scales)
    scales[:, :4] = sc[:, 0:4] & 63
    mins[:, :4] = sc[:, 4:8] & 63
    scales[:, 4:] = (sc[:, 8:12] & 15) | ((sc[:, 0:4] >> 6) << 4)
    mins[:, 4:] = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    return scales, mins


def _nibbles_by_64(qs):
    """qs [n, 128]: value 64*c + l is the low nibble of qs[32*c + l], 64*c + 32 + l the high."""
    n = qs.shape[0]
    q = qs.reshape(n, 4, 32)
    return np.stack([q & 15, q >> 4], axis=2).reshape(n, 256).astype(np.int32)


def dequant_q2_k(b):
    scales, qs = b[:, 0:16].astype(np.int32), b[:, 16:80]
    d, dmin = _f16(b[:, 80:82]), _f16(b[:, 82:84])
    q = _spread_2bit(qs).reshape(-1, 16, 16)
    sc = (scales & 15).reshape(-1, 16, 1)
    mn = (scales >> 4).reshape(-1, 16, 1)
    return ((d.reshape(-1, 1, 1) * sc) * q - dmin.reshape(-1, 1, 1) * mn).reshape(-1, 256)


def dequant_q3_k(b):
    hmask, qs, sc, d = b[:, 0:32], b[:, 32:96], b[:, 96:108].astype(np.int32), _f16(b[:, 108:110])
    low = _spread_2bit(qs)
    n = b.shape[0]
    # third bit of value 128*h + 32*j + l: bit 4h + j of hmask[l]; set means +0, clear means -4
    bits = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    high = ((hmask.reshape(n, 1, 32) >> bits) & 1).reshape(n, 256).astype(np.int32)
    q = low + 4 * high - 4
    g = np.arange(16)
    lowbits = np.where(g < 8, sc[:, g % 8] & 15, sc[:, g % 8] >> 4)
    highbits = (sc[:, 8 + g % 4] >> (2 * (g // 4))) & 3
    scales = (lowbits | (highbits << 4)) - 32
    return (d.reshape(-1, 1, 1) * scales.reshape(n, 16, 1) * q.reshape(n, 16, 16)).reshape(n, 256)


def dequant_q4_k(b):
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    scales, mins = _k4_scales_mins(b[:, 4:16])
    q = _nibbles_by_64(b[:, 16:144]).reshape(-1, 8, 32)
    return ((d.reshape(-1, 1, 1) * scales[:, :, None]) * q
            - dmin.reshape(-1, 1, 1) * mins[:, :, None]).reshape(-1, 256)


def dequant_q5_k(b):
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    scales, mins = _k4_scales_mins(b[:, 4:16])
    qh, n = b[:, 16:48], b.shape[0]
    bits = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    high = ((qh.reshape(n, 1, 32) >> bits) & 1).reshape(n, 256).astype(np.int32)  # bit i // 32
    q = (_nibbles_by_64(b[:, 48:176]) + 16 * high).reshape(n, 8, 32)
    return ((d.reshape(-1, 1, 1) * scales[:, :, None]) * q
            - dmin.reshape(-1, 1, 1) * mins[:, :, None]).reshape(n, 256)


def dequant_q6_k(b):
    ql, qh, n = b[:, 0:128], b[:, 128:192], b.shape[0]
    scales = b[:, 192:208].copy().view(np.int8).astype(np.float32)
    d = _f16(b[:, 208:210])
    q = np.empty((n, 2, 4, 32), dtype=np.int32)
    for h in range(2):
        lo = ql[:, 64 * h:64 * h + 64].reshape(n, 2, 32)
        hi = qh[:, 32 * h:32 * h + 32].astype(np.int32)
        for k in range(4):
            nib = lo[:, k % 2] & 15 if k < 2 else lo[:, k % 2] >> 4
            q[:, h, k] = nib.astype(np.int32) | (((hi >> (2 * k)) & 3) << 4)
    q = (q.reshape(n, 256) - 32).reshape(n, 16, 16)
    return (d.reshape(-1, 1, 1) * scales[:, :, None] * q).reshape(n, 256)


def dequant_q8_k(b):
    d = b[:, 0:4].copy().view(np.float32).reshape(-1, 1)
    return d * b[:, 4:260].copy().view(np.int8).astype(np.float32)


K_DEQUANT = {"Q2_K": dequant_q2_k, "Q3_K": dequant_q3_k, "Q4_K": dequant_q4_k,
             "Q5_K": dequant_q5_k, "Q6_K": dequant_q6_k, "Q8_K": dequant_q8_k}


class GGUFReader:
    def __init__(self, path):
        self.data = open(path, "rb").read()
        self.pos = 0
        magic = self.data[:4]
        if magic not in (b"GGUF", b"PWRI"):
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        self.version = self._read("<I")
        n_tensors = self._read("<Q")
        n_kv = self._read("<Q")
        self.kv = {}
        for _ in range(n_kv):
            key = self._string()
            vtype = self._read("<I")
            self.kv[key] = self._value(vtype)
        self.alignment = int(self.kv.get("general.alignment", 32))
        self.tensors = {}
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._read("<I")
            dims = [self._read("<Q") for _ in range(n_dims)]
            ttype = self._read("<I")
            offset = self._read("<Q")
            infos.append((name, dims, ttype, offset))
        data_start = (self.pos + self.alignment - 1) // self.alignment * self.alignment
        for name, dims, ttype, offset in infos:
            self.tensors[name] = (dims, ttype, data_start + offset)

    def _read(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def _string(self):
        n = self._read("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8", errors="surrogateescape")
        self.pos += n
        return s

    def _value(self, vtype):
        if vtype == STRING:
            return self._string()
        if vtype == ARRAY:
            itype = self._read("<I")
            n = self._read("<Q")
            return [self._value(itype) for _ in range(n)]
        return self._read(_SCALAR[vtype])

    def tensor(self, name):
        """The tensor dequantized to float32, shaped [dims[-1], ..., dims[0]] (numpy order)."""
        dims, ttype, start = self.tensors[name]
        tname, block, block_bytes = TYPES[ttype]
        n = int(np.prod(dims))
        raw = np.frombuffer(self.data, dtype=np.uint8, count=n // block * block_bytes, offset=start)
        if tname == "F32":
            out = raw.view(np.float32)
        elif tname == "F16":
            out = raw.view(np.float16).astype(np.float32)
        elif tname == "BF16":
            out = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif tname == "Q8_0":
            b = raw.reshape(-1, 34)
            d = b[:, :2].copy().view(np.float16).astype(np.float32)
            q = b[:, 2:].view(np.int8).astype(np.float32)
            out = (q * d).reshape(-1)
        elif tname == "Q4_0":
            b = raw.reshape(-1, 18)
            d = b[:, :2].copy().view(np.float16).astype(np.float32)
            qs = b[:, 2:]
            lo = (qs & 0x0F).astype(np.float32) - 8
            hi = (qs >> 4).astype(np.float32) - 8
            out = (np.concatenate([lo, hi], axis=1) * d).reshape(-1)
        elif tname in K_DEQUANT:
            out = K_DEQUANT[tname](raw.reshape(-1, block_bytes)).astype(np.float32).reshape(-1)
        return out.reshape(list(reversed(dims)))

    def type_name(self, name):
        return TYPES[self.tensors[name][1]][0]


class GGUFWriter:
    """Writes metadata and F32 or F16 tensors (enough for tokenizer-only files and fixtures)."""

    def __init__(self):
        self.kv = []
        self.tensors = []

    def add(self, key, vtype, value, item_type=None):
        self.kv.append((key, vtype, value, item_type))

    def add_tensor(self, name, array, f16=False):
        dtype = np.float16 if f16 else np.float32
        self.tensors.append((name, np.ascontiguousarray(array, dtype=dtype)))

    def _value(self, vtype, value, item_type):
        if vtype == STRING:
            b = value.encode("utf-8")
            return struct.pack("<Q", len(b)) + b
        if vtype == ARRAY:
            out = struct.pack("<IQ", item_type, len(value))
            return out + b"".join(self._value(item_type, v, None) for v in value)
        return struct.pack(_SCALAR[vtype], value)

    def write(self, path):
        out = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for key, vtype, value, item_type in self.kv:
            out += self._value(STRING, key, None) + struct.pack("<I", vtype)
            out += self._value(vtype, value, item_type)
        offset = 0
        offsets = []
        for name, arr in self.tensors:
            out += self._value(STRING, name, None) + struct.pack("<I", arr.ndim)
            for d in reversed(arr.shape):
                out += struct.pack("<Q", d)
            out += struct.pack("<IQ", 1 if arr.dtype == np.float16 else 0, offset)
            offsets.append(offset)
            offset = (offset + arr.nbytes + 31) // 32 * 32
        out += b"\0" * ((-len(out)) % 32)
        for (name, arr), off in zip(self.tensors, offsets):
            out += b"\0" * (len(out) % 32 and (32 - len(out) % 32))
            out += arr.tobytes()
        with open(path, "wb") as f:
            f.write(bytes(out))
