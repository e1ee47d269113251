"""PyTorch references for gmlp's masked-language models (src/nn/text_model.h), with the same
parameter names: gMLP and aMLP over token embeddings (no positions), and the pre-LayerNorm
BERT-style Transformer with learned absolute positions ("bert") or T5 relative position biases
("bert_rel"), whose attention ignores [PAD] (id 0) keys; gMLP and aMLP leave [PAD] out of the
spatial gate's token mix and the tiny attention's keys (gate_pad_mask). MLM logits use the token embedding as the output projection (tied), plus a bias.
With segments=True any of them adds BERT's segment (token-type) embedding: row 0 up to and
including a sequence's first [SEP] (id 3), row 1 after it.

    import sys; sys.path.insert(0, 'tests/reference'); import text_models
    net = text_models.build({"model": "bert_rel", "vocab_size": 100, "seq_len": 16, "depth": 2,
                             "dim": 32, "ffn": 64, "heads": 4, "num_classes": 3})
"""
import math

import torch
import torch.nn as nn
from timm.layers import Mlp

import models

SEP = 3  # the tokenizer's reserved ids: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4

DEFAULTS = dict(model="gmlp", vocab_size=8000, seq_len=128, depth=4, dim=256, ffn=1024, heads=4,
                attn_dim=64, gate="split", num_classes=0, pad_mask=True, gate_pad_mask=True, segments=False, rel_buckets=32,
                rel_max_distance=128,
                drop_path=0.0, ln_eps=1e-6, gate_eps=1e-5)


def full_config(cfg: dict) -> dict:
    out = dict(DEFAULTS)
    out.update(cfg)
    return out


def t5_bucket(rel: int, num_buckets: int, max_distance: int) -> int:
    """transformers' T5Attention._relative_position_bucket, bidirectional, for one value."""
    half = num_buckets // 2
    bucket = half if rel > 0 else 0
    n = abs(rel)
    max_exact = half // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact)
                            * (half - max_exact))
    return bucket + min(large, half - 1)


class Attention(nn.Module):
    """Multi-head self-attention with an optional additive (heads, N, N) score bias."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, bias=None, key_bias=None):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
        if bias is not None:
            s = s + bias[None]
        if key_bias is not None:  # (B, N): -1e9 on [PAD] keys
            s = s + key_bias[:, None, None, :]
        return self.proj((s.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, N, C))


class TransformerBlock(nn.Module):
    def __init__(self, dim, ffn, heads, eps):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, ffn)

    def forward(self, x, bias=None, key_bias=None):
        x = x + self.attn(self.norm1(x), bias, key_bias)
        return x + self.mlp(self.norm2(x))


class TextModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = full_config(cfg)
        self.c = c
        V, N, D = c["vocab_size"], c["seq_len"], c["dim"]
        self.embed = nn.Embedding(V, D)
        self.kind = c["model"]
        if self.kind == "bert":
            self.pos_embed = nn.Parameter(torch.zeros(1, N, D))
        if c["segments"]:
            self.segment_embed = nn.Embedding(2, D)
        if self.kind == "bert_rel":
            self.rel_bias = nn.Embedding(c["rel_buckets"], c["heads"])
            b = [[t5_bucket(j - i, c["rel_buckets"], c["rel_max_distance"]) for j in range(N)]
                 for i in range(N)]
            self.register_buffer("buckets", torch.tensor(b), persistent=False)
        if self.kind in ("gmlp", "amlp"):
            attn = c["attn_dim"] if self.kind == "amlp" else 0
            self.blocks = nn.ModuleList(
                models.GmlpBlock(D, models.GatingMlp(D, c["ffn"], N, c["gate"], c["gate_eps"], attn),
                                 c["ln_eps"]) for _ in range(c["depth"]))
        else:
            self.blocks = nn.ModuleList(TransformerBlock(D, c["ffn"], c["heads"], c["ln_eps"])
                                        for _ in range(c["depth"]))
        self.norm = nn.LayerNorm(D, eps=c["ln_eps"])
        self.mlm_bias = nn.Parameter(torch.zeros(V))
        if c["num_classes"] > 0:
            self.cls_head = nn.Linear(D, c["num_classes"])

    def encode(self, ids):
        x = self.embed(ids)
        if self.kind == "bert":
            x = x + self.pos_embed
        if self.c["segments"]:  # 1 where a [SEP] came strictly before
            sep = (ids == SEP).long()
            x = x + self.segment_embed(((sep.cumsum(dim=1) - sep) > 0).long())
        bias = self.rel_bias(self.buckets).permute(2, 0, 1) if self.kind == "bert_rel" else None
        if self.kind in ("gmlp", "amlp"):
            keep = ids != 0 if self.c["gate_pad_mask"] else None
            for block in self.blocks:
                x = block(x, keep)
        else:
            key_bias = (ids == 0).to(x.dtype) * -1e9 if self.c["pad_mask"] else None
            for block in self.blocks:
                x = block(x, bias, key_bias)
        return self.norm(x)

    def mlm_logits(self, h):
        return h @ self.embed.weight.t() + self.mlm_bias

    def classify(self, h):
        return self.cls_head(h[:, 0])


def build(cfg: dict) -> TextModel:
    return TextModel(cfg)
