"""PyTorch references for every vision model gmlp builds, from gmlp's own config (the JSON that
`gmlp info --json` prints and checkpoints carry). Parameter names are gmlp's, which are timm's
wherever timm has the model:

    gmlp (split gate)  timm MlpMixer + SpatialGatingBlock          (timm_gmlp.build)
    mixer              timm MlpMixer
    resmlp             timm MlpMixer + ResBlock + Affine (timm's ResMLP)
    vit                timm VisionTransformer, learned positions; class token or global_pool='avg'
                       (the mean of the patch tokens, then fc_norm), with or without the class token
    amlp, gate ablations, ffonly, eamlp: written here, from the papers (see each class)
    cnn                a CIFAR-style ResNet of torchvision BasicBlocks, written here (Cnn)

    import sys; sys.path.insert(0, 'tests/reference'); import models
    net = models.build({"model": "vit", "img_size": 28, "in_chans": 1, "patch_size": 4,
                        "depth": 2, "dim": 32, "ffn": 64, "heads": 4, "num_classes": 10})
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from functools import partial
from timm.layers import Mlp
from timm.models.mlp_mixer import Affine, MlpMixer, ResBlock
from timm.models.vision_transformer import VisionTransformer

import timm_gmlp

DEFAULTS = dict(model="gmlp", img_size=28, in_chans=1, patch_size=4, depth=6, dim=128, ffn=512,
                num_classes=10, drop_path=0.0, ln_eps=1e-6, gate_eps=1e-5, gate="split",
                attn_dim=64, heads=4, token_ffn=64, memory=64, init_scale=0.1,
                class_token=True, global_pool="token")


def full_config(cfg: dict) -> dict:
    """cfg with gmlp's defaults filled in (what the C++ side reads)."""
    out = dict(DEFAULTS)
    out.update(cfg)
    return out


def ratio(dim: int, hidden: int) -> float:
    return timm_gmlp.mlp_ratio_for(dim, hidden)


class TinyAttention(nn.Module):
    """aMLP's tiny attention (Liu et al. 2021, §4.3): one head of width d_attn, on the block's
    normalised input, projected to the gate's width."""

    def __init__(self, dim, d_attn, d_out):
        super().__init__()
        self.d_attn = d_attn
        self.qkv = nn.Linear(dim, 3 * d_attn)
        self.proj = nn.Linear(d_attn, d_out)

    def forward(self, x, keep=None):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        s = q @ k.transpose(-2, -1) / math.sqrt(self.d_attn)
        if keep is not None:  # (B, N): padding is no key
            s = s + torch.where(keep, 0.0, -1e9).to(s.dtype)[:, None, :]
        return self.proj(torch.softmax(s, dim=-1) @ v)


class Gate(nn.Module):
    """The spatial gating unit with the paper's gating functions s(Z) (§3.1 ablation):
    split u⊙f(v), multiplicative z⊙f(z), additive z+f(z), linear f(z); f = proj over tokens of
    LayerNorm(v), plus the tiny attention's output when given. keep (B, N), when given, zeroes the
    normalised v of padding tokens, so that the token mix leaves them out."""

    def __init__(self, ffn, seq_len, kind, eps):
        super().__init__()
        self.kind = kind
        width = ffn // 2 if kind == "split" else ffn
        self.norm = nn.LayerNorm(width, eps=eps)
        self.proj = nn.Linear(seq_len, seq_len)

    def forward(self, z, res=None, keep=None):
        u, v = z.chunk(2, dim=-1) if self.kind == "split" else (z, z)
        vn = self.norm(v)
        if keep is not None:
            vn = vn * keep[..., None].to(vn.dtype)
        g = self.proj(vn.transpose(-1, -2)).transpose(-1, -2)
        if res is not None:
            g = g + res
        if self.kind in ("split", "multiplicative"):
            return u * g
        return u + g if self.kind == "additive" else g


class GatingMlp(nn.Module):
    def __init__(self, dim, ffn, seq_len, kind, gate_eps, attn_dim):
        super().__init__()
        width = ffn // 2 if kind == "split" else ffn
        self.fc1 = nn.Linear(dim, ffn)
        self.gate = Gate(ffn, seq_len, kind, gate_eps)
        self.fc2 = nn.Linear(width, dim)
        self.attn = TinyAttention(dim, attn_dim, width) if attn_dim else None

    def forward(self, xn, keep=None):
        z = F.gelu(self.fc1(xn))
        return self.fc2(self.gate(z, self.attn(xn, keep) if self.attn is not None else None, keep))


class GmlpBlock(nn.Module):
    def __init__(self, dim, mlp_channels, eps):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.mlp_channels = mlp_channels

    def forward(self, x, keep=None):
        return x + self.mlp_channels(self.norm(x), keep)


class LinearBlock(nn.Module):
    """Melas-Kyriazi (2021) 'Do you even need attention?': a feed-forward layer over channels,
    then one over tokens (with a LayerNorm over the tokens), both residual."""

    def __init__(self, dim, ffn, seq_len, token_ffn, eps):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.mlp1 = Mlp(dim, ffn)
        self.norm2 = nn.LayerNorm(seq_len, eps=eps)
        self.mlp2 = Mlp(seq_len, token_ffn)

    def forward(self, x):
        x = x + self.mlp1(self.norm1(x))
        x = x.transpose(-2, -1)
        x = x + self.mlp2(self.norm2(x))
        return x.transpose(-2, -1)


class ExternalAttention(nn.Module):
    """Guo et al. (2021) multi-head external attention (their MEAttention with coef 1): memories
    linear_0 (M_k) and linear_1 (M_v) shared across heads; softmax over tokens, then the l1
    normalisation over memory units."""

    def __init__(self, dim, heads, memory):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.linear_0 = nn.Linear(dim // heads, memory)
        self.linear_1 = nn.Linear(memory, dim // heads)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q = self.query(x).view(B, N, self.heads, C // self.heads).permute(0, 2, 1, 3)
        a = self.linear_0(q).softmax(dim=-2)
        a = a / (1e-9 + a.sum(dim=-1, keepdim=True))
        o = self.linear_1(a).permute(0, 2, 1, 3).reshape(B, N, C)
        return self.proj(o)


class EaBlock(nn.Module):
    def __init__(self, dim, ffn, heads, memory, eps):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = ExternalAttention(dim, heads, memory)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, ffn)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchModel(nn.Module):
    """Patch stem → blocks → LayerNorm → pool → head; with a class token and learned positions
    (ViT-style: 'patch_embed', pooled from the class token) or without ('stem', token mean)."""

    def __init__(self, c, blocks, class_token):
        super().__init__()
        D, P = c["dim"], c["patch_size"]
        conv = nn.Conv2d(c["in_chans"], D, P, stride=P)
        n = (c["img_size"] // P) ** 2
        self.class_token = class_token
        if class_token:
            self.patch_embed = nn.Module()
            self.patch_embed.proj = conv
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, D))
        else:
            self.stem = nn.Module()
            self.stem.proj = conv
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(D, eps=c["ln_eps"])
        self.head = nn.Linear(D, c["num_classes"])

    def no_weight_decay(self):
        return {"cls_token", "pos_embed"} if self.class_token else set()

    def forward(self, img):
        conv = self.patch_embed.proj if self.class_token else self.stem.proj
        x = conv(img).flatten(2).transpose(1, 2)
        if self.class_token:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(x[:, 0] if self.class_token else x.mean(dim=1))


class ConvBn(nn.Module):
    """conv (k×k, no bias, padding k//2) → BatchNorm2d (torch defaults: eps 1e-5, momentum 0.1)."""

    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: ReLU(BN2(conv2(ReLU(BN1(conv1(x))))) + shortcut(x)), the
    shortcut conv1x1 → BN where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = ConvBn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (self.shortcut(x) if self.shortcut is not None else x))


class Cnn(nn.Module):
    """The small residual CNN (CIFAR-style ResNet): stem conv3x3 → BN → ReLU; three stages of
    widths dim, 2·dim, 4·dim with `depth` BasicBlocks each (the first block of stages 1 and 2 has
    stride 2); global average pool; Linear head."""

    def __init__(self, c):
        super().__init__()
        D = c["dim"]
        self.stem = ConvBn(c["in_chans"], D, 3, 1)
        stages, cin = [], D
        for s in range(3):
            blocks = []
            for i in range(c["depth"]):
                blocks.append(BasicBlock(cin, D << s, 2 if s > 0 and i == 0 else 1))
                cin = D << s
            stages.append(nn.ModuleList(blocks))
        self.stages = nn.ModuleList(stages)
        self.head = nn.Linear(4 * D, c["num_classes"])
        for m in self.modules():  # torchvision ResNet's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, img):
        x = F.relu(self.stem(img))
        for stage in self.stages:
            for block in stage:
                x = block(x)
        return self.head(x.mean(dim=(2, 3)))


def build(cfg: dict) -> nn.Module:
    """The reference model for a gmlp config (defaults filled in), drop path 0."""
    c = full_config(cfg)
    kind, D, L = c["model"], c["dim"], c["depth"]
    n = (c["img_size"] // c["patch_size"]) ** 2
    common = dict(num_classes=c["num_classes"], img_size=c["img_size"], in_chans=c["in_chans"],
                  patch_size=c["patch_size"])
    if kind == "gmlp" and c["gate"] == "split":
        return timm_gmlp.build(c)
    if kind in ("gmlp", "amlp"):
        attn = c["attn_dim"] if kind == "amlp" else 0
        blocks = [GmlpBlock(D, GatingMlp(D, c["ffn"], n, c["gate"], c["gate_eps"], attn), c["ln_eps"])
                  for _ in range(L)]
        return PatchModel(c, blocks, class_token=False)
    if kind == "mixer":
        return MlpMixer(**common, num_blocks=L, embed_dim=D,
                        mlp_ratio=(ratio(D, c["token_ffn"]), ratio(D, c["ffn"])),
                        norm_layer=partial(nn.LayerNorm, eps=c["ln_eps"]))
    if kind == "resmlp":
        return MlpMixer(**common, num_blocks=L, embed_dim=D, mlp_ratio=ratio(D, c["ffn"]),
                        block_layer=partial(ResBlock, init_values=c["init_scale"]),
                        norm_layer=Affine)
    if kind == "vit":
        return VisionTransformer(**common, embed_dim=D, depth=L, num_heads=c["heads"],
                                 mlp_ratio=ratio(D, c["ffn"]), qkv_bias=True,
                                 class_token=c["class_token"], global_pool=c["global_pool"],
                                 norm_layer=partial(nn.LayerNorm, eps=c["ln_eps"]))
    if kind == "ffonly":
        blocks = [LinearBlock(D, c["ffn"], n + 1, c["token_ffn"], c["ln_eps"]) for _ in range(L)]
        return PatchModel(c, blocks, class_token=True)
    if kind == "eamlp":
        blocks = [EaBlock(D, c["ffn"], c["heads"], c["memory"], c["ln_eps"]) for _ in range(L)]
        return PatchModel(c, blocks, class_token=True)
    if kind == "cnn":
        return Cnn(c)
    raise ValueError(f"failed to build: no reference for model '{kind}'")
