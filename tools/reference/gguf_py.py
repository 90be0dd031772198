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
         30: ("BF16", 1, 2)}


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
        return out.reshape(list(reversed(dims)))

    def type_name(self, name):
        return TYPES[self.tensors[name][1]][0]


class GGUFWriter:
    """Writes metadata and F32 tensors (enough for tokenizer-only files and fixtures)."""

    def __init__(self):
        self.kv = []
        self.tensors = []

    def add(self, key, vtype, value, item_type=None):
        self.kv.append((key, vtype, value, item_type))

    def add_tensor(self, name, array):
        self.tensors.append((name, np.ascontiguousarray(array, dtype=np.float32)))

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
            out += struct.pack("<IQ", 0, offset)
            offsets.append(offset)
            offset = (offset + arr.nbytes + 31) // 32 * 32
        out += b"\0" * ((-len(out)) % 32)
        for (name, arr), off in zip(self.tensors, offsets):
            out += b"\0" * (len(out) % 32 and (32 - len(out) % 32))
            out += arr.tobytes()
        with open(path, "wb") as f:
            f.write(bytes(out))
