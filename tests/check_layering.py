#!/usr/bin/env python3
"""ctest layering: src/ keeps docs/ARCHITECTURE.md's layering (scripts/check_layers.py), and the
check fails on a tree that breaks it (an upward include, a sibling include, the CUDA backend's
header outside backends/cuda/), so a passing run means something."""
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
check = [sys.executable, os.path.join(root, "scripts", "check_layers.py")]

real = subprocess.run(check + [os.path.join(root, "src")], capture_output=True, text=True)
if real.returncode != 0:
    print(real.stdout + real.stderr)
    sys.exit("src/ breaks the layering")

BROKEN = {
    "tensor/matrix.h": '#include "runtime/session.h"\n',           # upward
    "planning/plan.cpp": '#include "generation/sampler.h"\n',      # sideways
    "runtime/session.cpp": '#include "backends/cuda/cuda_backend.h"\n',  # the device seam
}
for path, line in BROKEN.items():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, os.path.dirname(path)))
        with open(os.path.join(tmp, path), "w") as f:
            f.write("// planted\n" + line)
        r = subprocess.run(check + [tmp], capture_output=True, text=True)
        if r.returncode != 1 or path not in r.stdout:
            print(r.stdout + r.stderr)
            sys.exit(f"the check let {path}'s '{line.strip()}' pass")
print("layering kept; the check refuses an upward, a sibling and a CUDA include")
