"""Write the PyTorch/timm fixtures that the C++ gMLP parity tests compare against.

    python tests/reference/make_fixtures.py --out build/fixtures

For each case (tiny_gray, tiny_rgb) it builds timm's gMLP, gives it random weights (fixed seed),
computes everything in float64 and saves float32:
  <case>.model.safetensors  the state_dict (timm key names)
  <case>.io.safetensors     images, labels, logits, loss (cross entropy, label smoothing 0.1),
                            grad.<name> for every parameter, then for 3 AdamW steps on the same
                            batch (two param groups as timm, clip_grad_norm 1.0):
                            step<k>.loss (loss before update k) and step<k>.<name> (after it).
                            Metadata: config (JSON) and the optimizer/loss settings.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timm_gmlp  # noqa: E402

CASES = {
    "tiny_gray": dict(config=dict(img_size=8, in_chans=1, patch_size=2, depth=2, dim=8, ffn=16,
                                  num_classes=5), batch=3, seed=1),
    "tiny_rgb": dict(config=dict(img_size=12, in_chans=3, patch_size=4, depth=2, dim=12, ffn=24,
                                 num_classes=4), batch=2, seed=2),
}
OPT = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.05, clip_norm=1.0,
           label_smoothing=0.1, steps=3)


def param_groups(model):
    """timm's split: no weight decay for params with ndim <= 1 or names ending in '.bias'."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
    return [dict(params=no_decay, weight_decay=0.0),
            dict(params=decay, weight_decay=OPT["weight_decay"])]


def f32(t):
    return t.detach().to(torch.float32).contiguous()


def make_case(name, case, out_dir):
    cfg, batch = case["config"], case["batch"]
    torch.manual_seed(case["seed"])
    gen = torch.Generator().manual_seed(case["seed"])
    model = timm_gmlp.build(cfg)
    timm_gmlp.randomize_(model, gen)  # float32 weights: exactly what the C++ side loads
    model_path = os.path.join(out_dir, f"{name}.model.safetensors")
    save_file({k: f32(v) for k, v in model.state_dict().items()}, model_path)
    print(f"wrote {model_path}")

    model = model.double().train()  # no dropout/drop_path in this model: train == eval
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
    for pname, p in model.named_parameters():
        io[f"grad.{pname}"] = f32(p.grad)

    params = [p for _, p in model.named_parameters()]
    opt = torch.optim.AdamW(param_groups(model), lr=OPT["lr"], betas=(OPT["beta1"], OPT["beta2"]),
                            eps=OPT["eps"])
    for k in range(1, OPT["steps"] + 1):
        opt.zero_grad()
        loss = loss_of(model(x))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, OPT["clip_norm"])
        opt.step()
        io[f"step{k}.loss"] = f32(loss.reshape(1))
        for pname, p in model.named_parameters():
            io[f"step{k}.{pname}"] = f32(p)

    metadata = {"config": json.dumps(cfg)}
    metadata.update({k: repr(v) for k, v in OPT.items()})
    io_path = os.path.join(out_dir, f"{name}.io.safetensors")
    save_file(io, io_path, metadata=metadata)
    print(f"wrote {io_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the fixture files")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    for name, case in CASES.items():
        make_case(name, case, args.out)


if __name__ == "__main__":
    main()
