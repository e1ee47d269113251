"""Write the PyTorch/timm fixtures that the C++ parity tests compare against.

    python tests/reference/make_fixtures.py --out build/fixtures

For each case it builds the reference model (timm's where timm has it; tests/reference/models.py),
gives it random weights (fixed seed), computes everything in float64 and saves float32:
  <case>.model.safetensors  the state_dict (timm key names). The two timm gMLP cases carry no
                            metadata (the C++ side reads their config from the tensor shapes);
                            the others carry gmlp's config JSON, as gmlp's checkpoints do.
  <case>.io.safetensors     images, labels, logits, loss (cross entropy, label smoothing 0.1),
                            grad.<name> for every parameter, then for 3 AdamW steps on the same
                            batch (two param groups as timm, clip_grad_norm 1.0):
                            step<k>.loss (loss before update k) and step<k>.<name> (after it).
                            ema.<name>: timm's ModelEmaV2 (decay ema_decay) of the weights
                            and float buffers, made before step 1 and updated after each step.
                            Models with BatchNorm also get eval_logits: the logits in eval mode
                            (running statistics) after the last step.
                            Metadata: config (JSON) and the optimizer/loss settings.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from timm.utils import ModelEmaV2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import text_models  # noqa: E402
import timm_gmlp  # noqa: E402

TINY = dict(img_size=8, in_chans=2, patch_size=2, depth=2, dim=8, ffn=16, num_classes=5,
            heads=2, token_ffn=6, memory=5, attn_dim=4)


def kind(model, **extra):
    cfg = dict(TINY, model=model)
    cfg.update(extra)
    return dict(config=cfg, batch=3, seed=len(model) + 10 * len(extra), with_config=True)


CASES = {
    "tiny_gray": dict(config=dict(img_size=8, in_chans=1, patch_size=2, depth=2, dim=8, ffn=16,
                                  num_classes=5), batch=3, seed=1),
    "tiny_rgb": dict(config=dict(img_size=12, in_chans=3, patch_size=4, depth=2, dim=12, ffn=24,
                                 num_classes=4), batch=2, seed=2),
    "amlp": kind("amlp"),
    "gate_multiplicative": kind("gmlp", gate="multiplicative"),
    "gate_additive": kind("gmlp", gate="additive"),
    "gate_linear": kind("gmlp", gate="linear"),
    "vit": kind("vit"),
    "vit_avg": kind("vit", class_token=False, global_pool="avg"),
    "vit_cls_avg": kind("vit", global_pool="avg"),
    "mixer": kind("mixer"),
    "resmlp": kind("resmlp"),
    "ffonly": kind("ffonly"),
    "eamlp": kind("eamlp"),
    "cnn": kind("cnn", dim=4, depth=1),
}
OPT = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.05, clip_norm=1.0,
           label_smoothing=0.1, steps=3, ema_decay=0.8)


def param_groups(model):
    """timm's split (param_groups_weight_decay): no weight decay for params with ndim <= 1, names
    ending in '.bias', or names in the model's no_weight_decay() (ViT: cls_token, pos_embed)."""
    skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith(".bias") or name in skip else decay).append(p)
    return [dict(params=no_decay, weight_decay=0.0),
            dict(params=decay, weight_decay=OPT["weight_decay"])]


def f32(t):
    return t.detach().to(torch.float32).contiguous()


def make_case(name, case, out_dir):
    cfg, batch = case["config"], case["batch"]
    torch.manual_seed(case["seed"])
    gen = torch.Generator().manual_seed(case["seed"])
    model = models.build(cfg)
    timm_gmlp.randomize_(model, gen)  # float32 weights: exactly what the C++ side loads
    model_path = os.path.join(out_dir, f"{name}.model.safetensors")
    meta = {"config": json.dumps(models.full_config(cfg))} if case.get("with_config") else None
    save_file({k: f32(v) for k, v in model.state_dict().items()}, model_path, metadata=meta)
    print(f"wrote {model_path}")

    model = model.double().train()  # drop path 0; BatchNorm (cnn) uses batch statistics
    images = torch.randn(batch, cfg["in_chans"], cfg["img_size"], cfg["img_size"], generator=gen)
    labels = torch.randint(0, cfg["num_classes"], (batch,), generator=gen)
    x = images.double()  # images are float32 values, so the C++ input is the same

    def loss_of(logits):
        return F.cross_entropy(logits, labels, label_smoothing=OPT["label_smoothing"])

    io = {"images": f32(images), "labels": labels.to(torch.int64)}
    logits = model(x)
    loss = loss_of(logits)
    loss.backward()
    io["logits"] = f32(logits)
    io["loss"] = f32(loss.reshape(1))
    # Elements whose gradient is zero by an invariance (a bias before a softmax or a LayerNorm
    # that removes it, as the key bias of attention): Adam normalises their rounding noise into
    # full-size steps, so the C++ test compares their gradient (zero) but not their value after
    # the steps. zero_grad.<name> marks them with 1.
    # Float buffers (BatchNorm's running statistics) are parameters without a gradient to gmlp:
    # their gradient is zero and their value after each step is compared like a parameter's.
    buffers = [(n, b) for n, b in model.named_buffers() if b.is_floating_point()]
    for bname, b in buffers:
        io[f"grad.{bname}"] = f32(torch.zeros_like(b))
    for pname, p in model.named_parameters():
        io[f"grad.{pname}"] = f32(p.grad)
        zero = p.grad.abs() < 1e-12
        if zero.any():
            io[f"zero_grad.{pname}"] = f32(zero.double())

    params = [p for _, p in model.named_parameters()]
    opt = torch.optim.AdamW(param_groups(model), lr=OPT["lr"], betas=(OPT["beta1"], OPT["beta2"]),
                            eps=OPT["eps"])
    ema = ModelEmaV2(model, decay=OPT["ema_decay"])  # timm's (DeiT's --model-ema), from here on
    for k in range(1, OPT["steps"] + 1):
        opt.zero_grad()
        loss = loss_of(model(x))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, OPT["clip_norm"])
        opt.step()
        ema.update(model)
        io[f"step{k}.loss"] = f32(loss.reshape(1))
        for pname, p in list(model.named_parameters()) + buffers:
            io[f"step{k}.{pname}"] = f32(p)
    ema_state = ema.module.state_dict()
    for pname, _ in list(model.named_parameters()) + buffers:
        io[f"ema.{pname}"] = f32(ema_state[pname])
    if buffers:  # BatchNorm: eval mode (running statistics) after the steps
        with torch.no_grad():
            io["eval_logits"] = f32(model.eval()(x))

    metadata = {"config": json.dumps(models.full_config(cfg))}
    metadata.update({k: repr(v) for k, v in OPT.items()})
    io_path = os.path.join(out_dir, f"{name}.io.safetensors")
    save_file(io, io_path, metadata=metadata)
    print(f"wrote {io_path}")


TEXT_TINY = dict(vocab_size=23, seq_len=6, depth=2, dim=8, ffn=16, heads=2, attn_dim=4,
                 num_classes=3, rel_buckets=8, rel_max_distance=16)
TEXT_CASES = {f"text_{k}": dict(config=dict(TEXT_TINY, model=k.removesuffix("_seg"),
                                             segments=k.endswith("_seg")), batch=3, seed=50 + i)
              for i, k in enumerate(["gmlp", "amlp", "bert", "bert_rel", "gmlp_seg", "bert_seg"])}


def make_text_case(name, case, out_dir):
    """A text model: MLM loss (mean cross-entropy at masked positions, logits tied to the
    embedding) and classification loss from [CLS], each with every parameter's gradient."""
    cfg, B = case["config"], case["batch"]
    torch.manual_seed(case["seed"])
    gen = torch.Generator().manual_seed(case["seed"])
    model = text_models.build(cfg)
    timm_gmlp.randomize_(model, gen)
    with torch.no_grad():  # embeddings O(1) like everything else
        model.embed.weight.copy_(torch.randn(model.embed.weight.shape, generator=gen))
    model_path = os.path.join(out_dir, f"{name}.model.safetensors")
    save_file({k: f32(v) for k, v in model.state_dict().items()}, model_path,
              metadata={"config": json.dumps(text_models.full_config(cfg))})
    model = model.double()
    N, V, K = cfg["seq_len"], cfg["vocab_size"], cfg["num_classes"]
    ids = torch.randint(1, V, (B, N), generator=gen)
    ids[:, 2] = text_models.SEP  # "[CLS] a [SEP] b": segment 1 from position 3 on
    ids[:, -2:] = 0  # [PAD] at the end, as packing and the tasks leave it (masked in attention)
    positions = torch.nonzero(torch.rand(B * N, generator=gen) < 0.4).flatten()
    if positions.numel() == 0:
        positions = torch.tensor([0])
    mlm_labels = torch.randint(0, V, (positions.numel(),), generator=gen)
    cls_labels = torch.randint(0, K, (B,), generator=gen)
    io = {"ids": ids.to(torch.int64), "positions": positions.to(torch.int64),
          "mlm_labels": mlm_labels.to(torch.int64), "cls_labels": cls_labels.to(torch.int64)}

    def grads(prefix):
        for pname, p in model.named_parameters():
            io[f"{prefix}.{pname}"] = f32(p.grad if p.grad is not None else torch.zeros_like(p))

    h = model.encode(ids)
    logits = model.mlm_logits(h.reshape(B * N, -1)[positions])
    loss = F.cross_entropy(logits, mlm_labels)
    loss.backward()
    io["mlm_logits"], io["mlm_loss"] = f32(logits), f32(loss.reshape(1))
    grads("mlm_grad")
    model.zero_grad(set_to_none=True)
    h = model.encode(ids)
    logits = model.classify(h)
    loss = F.cross_entropy(logits, cls_labels)
    loss.backward()
    io["cls_logits"], io["cls_loss"] = f32(logits), f32(loss.reshape(1))
    grads("cls_grad")
    io_path = os.path.join(out_dir, f"{name}.io.safetensors")
    save_file(io, io_path, metadata={"config": json.dumps(text_models.full_config(cfg))})
    print(f"wrote {model_path}\nwrote {io_path}")


SPREAD_BASE = dict(img_size=28, in_chans=1, patch_size=4, depth=2, dim=128, ffn=512,
                   num_classes=10, heads=4, token_ffn=64, memory=64, attn_dim=64)
SPREAD_CASES = {name: dict(SPREAD_BASE, model=name.split("_")[0], **extra) for name, extra in {
    "gmlp": {}, "gmlp_multiplicative": dict(gate="multiplicative"), "amlp": {}, "vit": {},
    "mixer": {}, "resmlp": {}, "ffonly": {}, "eamlp": {}, "cnn": dict(dim=16, depth=1)}.items()}
SPREAD_DRAWS = 8  # models initialised per kind; their values are pooled per tensor


def timm_init(model, kind):
    """Initialises a reference model the way timm initialises the family gmlp says the kind
    belongs to. Kinds timm has (gMLP with the split gate, Mixer, ResMLP, ViT) and the CNN
    (torchvision's ResNet init) did it in their constructors; the others get timm's functions:
    aMLP and the gate ablations MlpMixer's _init_weights (the spatial gate as timm's
    SpatialGatingUnit.init_weights), feed-forward-only and EAMLP VisionTransformer's."""
    from timm.models import mlp_mixer, vision_transformer
    from timm.layers import trunc_normal_
    from timm.models._manipulate import named_apply
    timm_has = kind in ("mixer", "resmlp", "vit", "cnn") or (
        kind == "gmlp" and isinstance(model, MlpMixerType()))
    if timm_has:
        return
    if kind in ("gmlp", "amlp"):
        def gate_init(module, name):
            mlp_mixer._init_weights(module, name)
            if isinstance(module, models.Gate):  # timm SpatialGatingUnit.init_weights
                torch.nn.init.normal_(module.proj.weight, std=1e-6)
                torch.nn.init.ones_(module.proj.bias)
        named_apply(gate_init, model)
        return
    named_apply(vision_transformer.init_weights_vit_timm, model)
    torch.nn.init.normal_(model.cls_token, std=1e-6)
    trunc_normal_(model.pos_embed, std=0.02)


def MlpMixerType():
    from timm.models.mlp_mixer import MlpMixer
    return MlpMixer


def make_init_spread(out_dir):
    """init_spread.json: for every kind, per state_dict tensor, the count, mean and standard
    deviation of the values of SPREAD_DRAWS reference models as timm initialises them (float64
    statistics), and "constant" where every draw gave the same values (then "value" if all one)."""
    # The references draw in float64: torch's trunc_normal_ samples by the inverse CDF, and in
    # float32 a uniform draw of exactly -1 (probability 2^-24) becomes erfinv(-1) = -inf, clamped
    # to the bound: a weight of -2 among ones of std 0.02, which moves a tensor's std by 1 %.
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    out = {}
    for name, cfg in SPREAD_CASES.items():
        values = {}
        for draw in range(SPREAD_DRAWS):
            torch.manual_seed(1000 + draw)
            model = models.build(cfg)
            timm_init(model, cfg["model"])
            for key, t in model.state_dict().items():
                if t.is_floating_point():
                    values.setdefault(key, []).append(t.detach().double().flatten())
        stats = {}
        for key, draws in values.items():
            v = torch.cat(draws)
            constant = all(torch.equal(d, draws[0]) for d in draws)
            row = dict(n=v.numel(), mean=v.mean().item(), std=v.std(unbiased=False).item(),
                       constant=constant)
            if constant and bool((v == v[0]).all()):
                row["value"] = v[0].item()
            stats[key] = row
        out[name] = dict(config=models.full_config(cfg), draws=SPREAD_DRAWS, tensors=stats)
    torch.set_default_dtype(default_dtype)
    path = os.path.join(out_dir, "init_spread.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the fixture files")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    for name, case in CASES.items():
        make_case(name, case, args.out)
    for name, case in TEXT_CASES.items():
        make_text_case(name, case, args.out)
    make_init_spread(args.out)


if __name__ == "__main__":
    main()
