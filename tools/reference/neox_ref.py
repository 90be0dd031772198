"""What the PyTorch references of the RMSNorm, NeoX-RoPE families share (gpt_oss_ref.py,
glm4moe_ref.py): a GGUF file's tensors in float64, RMSNorm, a projection completed with its bias
and scale as llama.cpp's graph applies them (llamacpp_extras.finish), and rotate_half RoPE over
the first n_rot dimensions of each head (Hugging Face's apply_rotary_pos_emb; the rest pass)."""
import numpy as np
import torch

from gguf_py import GGUFReader
from llamacpp_extras import finish, rope_tables


class NeoxReference:
    def __init__(self, path):
        self.g = GGUFReader(path)

    def has(self, name):
        return name in self.g.tensors

    def weight(self, name):
        return torch.from_numpy(self.g.tensor(name).astype(np.float64))

    def rms_norm(self, x, name):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight(name)

    def proj(self, x, stem):
        return finish(self.g, stem, x @ self.weight(stem + ".weight").T)  # with its bias

    def rotate(self, x, positions):
        d = self.n_rot
        cos, sin = rope_tables(self.g, d, positions)
        cos, sin = torch.cat([cos, cos], -1)[:, None, :], torch.cat([sin, sin], -1)[:, None, :]
        rot, rest = x[..., :d], x[..., d:]
        half = torch.cat([-rot[..., d // 2:], rot[..., : d // 2]], dim=-1)
        return torch.cat([rot * cos + half * sin, rest], dim=-1)
