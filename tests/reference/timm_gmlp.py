"""Shared helpers for the PyTorch/timm side of the gMLP reference scripts.

The vision gMLP is timm's MlpMixer with SpatialGatingBlock + GatedMlp, exactly as timm defines
gmlp_s16_224. This module builds it from a small config dict, reads that config back from a
state_dict's tensor shapes, loads Fashion-MNIST test images, and fills a model with random
weights of a sensible scale (for parity tests: every op matters, logits are O(1)).

Not run directly; imported by make_fixtures.py, interop_timm.py and bench/pytorch_baseline.py:

    import sys; sys.path.insert(0, 'tests/reference'); import timm_gmlp
    model = timm_gmlp.build(dict(img_size=28, in_chans=1, patch_size=4, depth=2,
                                 dim=32, ffn=64, num_classes=10))

Config keys: img_size, in_chans, patch_size, depth (L), dim (D), ffn (F), num_classes (K).
"""
import gzip
import math
import os
import re

import numpy as np
import torch
import torch.nn as nn
from timm.models.mlp_mixer import GatedMlp, MlpMixer, SpatialGatingBlock

CONFIG_KEYS = ("img_size", "in_chans", "patch_size", "depth", "dim", "ffn", "num_classes")


def mlp_ratio_for(dim: int, ffn: int) -> float:
    """A float r with int(dim * r) == ffn, which is how timm turns mlp_ratio into channels."""
    r = ffn / dim
    for _ in range(8):
        if int(dim * r) == ffn:
            return r
        r = math.nextafter(r, math.inf)
    raise ValueError(f"failed to find mlp_ratio: no float gives ffn={ffn} for dim={dim}")


def build(cfg: dict) -> nn.Module:
    """timm's vision gMLP for cfg (see CONFIG_KEYS), with timm's own init, drop_path 0."""
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"failed to build gMLP: config lacks {missing}")
    dim, ffn = int(cfg["dim"]), int(cfg["ffn"])
    model = MlpMixer(
        num_classes=int(cfg["num_classes"]),
        img_size=int(cfg["img_size"]),
        in_chans=int(cfg["in_chans"]),
        patch_size=int(cfg["patch_size"]),
        num_blocks=int(cfg["depth"]),
        embed_dim=dim,
        mlp_ratio=mlp_ratio_for(dim, ffn),
        block_layer=SpatialGatingBlock,
        mlp_layer=GatedMlp,
        drop_path_rate=0.0,
    )
    got = model.blocks[0].mlp_channels.fc1.out_features if len(model.blocks) else ffn
    if got != ffn:
        raise ValueError(f"failed to build gMLP: fc1 must have ffn={ffn} outputs (got {got})")
    return model


def config_from_state_dict(sd) -> dict:
    """The build() config that produced state_dict sd, inferred from tensor shapes."""
    stem = sd["stem.proj.weight"]  # (D, C, P, P)
    dim, in_chans, patch_size = stem.shape[0], stem.shape[1], stem.shape[2]
    block_ids = {int(m.group(1)) for k in sd.keys() if (m := re.match(r"blocks\.(\d+)\.", k))}
    depth = len(block_ids)
    if block_ids != set(range(depth)):
        raise ValueError(f"failed to read config: block indices must be 0..L-1 (got {sorted(block_ids)})")
    if depth == 0:
        raise ValueError("failed to read config: state_dict has no blocks")
    ffn = sd["blocks.0.mlp_channels.fc1.weight"].shape[0]
    n_tokens = sd["blocks.0.mlp_channels.gate.proj.weight"].shape[0]
    grid = math.isqrt(n_tokens)
    if grid * grid != n_tokens:
        raise ValueError(f"failed to read config: token count must be a square (got {n_tokens})")
    return dict(
        img_size=grid * patch_size,
        in_chans=int(in_chans),
        patch_size=int(patch_size),
        depth=depth,
        dim=int(dim),
        ffn=int(ffn),
        num_classes=int(sd["head.weight"].shape[0]),
    )


def _read_idx(path: str) -> np.ndarray:
    """An IDX file (gzipped) as a uint8 array of its declared shape."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"failed to read {path}: must be IDX of unsigned bytes")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_fashion_mnist_test(n: int, dir: str = "/usr/share/datasets/fashion-mnist",
                            mean: float = 0.5, std: float = 0.5):
    """First n test images as float32 (n, 1, 28, 28), (x/255 - mean)/std, and int64 labels (n,)."""
    images = _read_idx(os.path.join(dir, "t10k-images-idx3-ubyte.gz"))[:n]
    labels = _read_idx(os.path.join(dir, "t10k-labels-idx1-ubyte.gz"))[:n]
    x = (images.astype(np.float32) / 255.0 - np.float32(mean)) / np.float32(std)
    return torch.from_numpy(x[:, None, :, :].copy()), torch.from_numpy(labels.astype(np.int64))


@torch.no_grad()
def randomize_(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Random weights of a sensible scale, in place: logits O(1), every op exercised.

    Matrices N(0,1)/sqrt(fan_in); LayerNorm weights 1 + 0.2 N(0,1); biases 0.2 N(0,1);
    SGU proj weight 0.5 N(0,1)/sqrt(N) (far from timm's near-zero init, so the token mixing
    matters) and SGU proj bias 1 + 0.2 N(0,1).
    """
    def normal(p):
        return torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.dtype)

    for name, p in model.named_parameters():
        if name.endswith("gate.proj.weight"):
            p.copy_(normal(p) * 0.5 / math.sqrt(p.shape[1]))
        elif name.endswith("gate.proj.bias"):
            p.copy_(1.0 + 0.2 * normal(p))
        elif name.endswith(".bias"):
            p.copy_(0.2 * normal(p))
        elif p.ndim == 1:  # LayerNorm weights
            p.copy_(1.0 + 0.2 * normal(p))
        else:  # Linear (out, in) and Conv2d (out, C, P, P): fan_in is everything but dim 0
            p.copy_(normal(p) / math.sqrt(p[0].numel()))
    return model
