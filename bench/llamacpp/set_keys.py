#!/usr/bin/env python3
"""A GGUF file copied with some metadata keys set (added or replaced), through llama.cpp's own
gguf-py (PYTHONPATH=LLAMA_CPP/gguf-py): llama.cpp's random test models given the keys a real
family's file has (Gemma 3's global RoPE base and scaling, a shorter window), so both engines
read the same variant.
Usage: set_keys.py IN.gguf OUT.gguf KEY=f32:VALUE|u32:VALUE|str:VALUE ..."""
import sys
import gguf

src, out, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
types = {"f32": (gguf.GGUFValueType.FLOAT32, float), "u32": (gguf.GGUFValueType.UINT32, int),
         "str": (gguf.GGUFValueType.STRING, str)}
new = {}
for e in edits:
    key, typed = e.split("=", 1)
    kind, value = typed.split(":", 1)
    vt, conv = types[kind]
    new[key] = (vt, conv(value))
r = gguf.GGUFReader(src)
arch = r.fields["general.architecture"].contents()
w = gguf.GGUFWriter(out, arch)
for name, f in r.fields.items():
    if name.startswith("GGUF.") or name == "general.architecture" or name in new:
        continue
    vt = f.types[0]
    if vt == gguf.GGUFValueType.ARRAY and not f.data:
        continue  # gguf-py writes no empty arrays (llama.cpp's saver does, for unused keys)
    if vt == gguf.GGUFValueType.ARRAY:
        w.add_key_value(name, f.contents(), vt, sub_type=f.types[-1])
    else:
        w.add_key_value(name, f.contents(), vt)
for key, (vt, value) in new.items():
    w.add_key_value(key, value, vt)
for t in r.tensors:
    w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
