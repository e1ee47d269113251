"""End-to-end check that weights move between timm and the gmlp binary, both ways, for every
model timm has: gMLP, MlpMixer (MixerBlock), ResMLP (ResBlock + Affine) and VisionTransformer.

    python tests/reference/interop_timm.py --gmlp build/gmlp --workdir /tmp/interop

(a) timm -> gmlp: a random timm gMLP (28x28x1, patch 4, depth 2, dim 32, ffn 64, 10 classes) is
    saved with safetensors (no metadata); `gmlp eval` writes its logits for the first 32
    Fashion-MNIST test images; they must match timm's float32 logits within 1e-4.
(b) gmlp -> timm: `gmlp train` (preset fmnist-ti, a short run) writes a checkpoint; timm loads it
    with strict=True and its logits must match `gmlp eval`'s within 1e-4. The checkpoint's
    metadata must hold "config", "mean" and "std".

(c) the same both ways for Mixer, ResMLP and ViT: timm's own class with random weights, saved with
    no metadata (a ViT of width 192 without its heads, read with timm's default of 3, and ViTs of
    width 32 whose heads, 4, are in the metadata: class token, and global_pool="avg" without and
    with the class token), evaluated by gmlp; and a short `gmlp train` of the fmnist preset of
    each kind (ViT also with --set global_pool=avg --set class_token=false), loaded into timm's
    class with strict=True.

Exit 0 on success; 1 with a one-line reason on failure. Prints the measured max abs differences.
--timm-only runs the timm side of both checks without the binary (to test this script).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import timm_gmlp  # noqa: E402

TOLERANCE = 1e-4
N_IMAGES = 32
CONFIG_A = dict(img_size=28, in_chans=1, patch_size=4, depth=2, dim=32, ffn=64, num_classes=10)


class CheckFailed(Exception):
    pass


def run_gmlp(cmd):
    """Run the gmlp binary; a non-zero exit becomes a one-line failure."""
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip() or "(no output)").splitlines()[-1]
        raise CheckFailed(f"`{' '.join(cmd[:2])}` exited {proc.returncode}: {tail}")


def timm_logits(model, mean=0.5, std=0.5):
    images, _ = timm_gmlp.load_fashion_mnist_test(N_IMAGES, mean=mean, std=std)
    model = model.float().eval()
    with torch.inference_mode():
        return model(images).numpy()


def compare(name, ours_path, theirs):
    if not os.path.exists(ours_path):
        raise CheckFailed(f"{name}: gmlp wrote no logits at {ours_path}")
    ours = np.load(ours_path)
    if ours.shape != theirs.shape:
        raise CheckFailed(f"{name}: logits must have shape {theirs.shape} (got {ours.shape})")
    if not np.abs(theirs).max() > 1e-3:
        raise CheckFailed(f"{name}: timm's logits are all near zero, so the comparison proves nothing")
    diff = float(np.abs(ours.astype(np.float64) - theirs.astype(np.float64)).max())
    print(f"{name}: max abs diff {diff:.3g} (tolerance {TOLERANCE:g}, |logits| up to "
          f"{float(np.abs(theirs).max()):.3g})")
    if not diff <= TOLERANCE:
        raise CheckFailed(f"{name}: max abs diff {diff:.3g} exceeds {TOLERANCE:g}")


def metadata_float(meta, key):
    """A mean/std metadata value as one float: accepts "0.5", "[0.5]" or a JSON list of one."""
    try:
        value = json.loads(meta[key])
    except json.JSONDecodeError:
        raise CheckFailed(f"checkpoint metadata {key} must be a number or JSON list (got {meta[key]!r})")
    if isinstance(value, list):
        if len(value) != 1:
            raise CheckFailed(f"checkpoint metadata {key} must have one value per channel (1), got {value}")
        value = value[0]
    return float(value)


def check_timm_to_gmlp(gmlp, workdir, timm_only):
    model = timm_gmlp.build(CONFIG_A)
    timm_gmlp.randomize_(model, torch.Generator().manual_seed(0))
    ckpt = os.path.join(workdir, "timm.safetensors")
    save_file(model.state_dict(), ckpt)
    expected = timm_logits(model)
    if timm_only:
        print(f"timm->gmlp: timm side only, wrote {ckpt}, logits {expected.shape}, "
              f"|logits| up to {float(np.abs(expected).max()):.3g}")
        return
    out = os.path.join(workdir, "gmlp_logits.npy")
    run_gmlp([gmlp, "eval", "--checkpoint", ckpt, "--limit", str(N_IMAGES), "--logits", out,
              "--threads", "2"])
    compare("timm->gmlp", out, expected)


def check_gmlp_to_timm(gmlp, workdir, timm_only):
    run_dir = os.path.join(workdir, "run")
    ckpt = os.path.join(run_dir, "checkpoint.safetensors")
    if timm_only:  # stand in for the binary's checkpoint with a timm one of the fmnist shape
        os.makedirs(run_dir, exist_ok=True)
        stand_in = timm_gmlp.build(CONFIG_A)
        save_file(stand_in.state_dict(), ckpt,
                  metadata={"config": json.dumps(CONFIG_A), "mean": "[0.5]", "std": "[0.5]"})
    else:
        run_gmlp([gmlp, "train", "--preset", "fmnist-ti", "--epochs", "1", "--train-limit", "2048",
                  "--batch-size", "64", "--out", run_dir, "--overwrite", "--threads", "2", "--seed", "1"])
    if not os.path.exists(ckpt):
        raise CheckFailed(f"gmlp->timm: gmlp train wrote no checkpoint at {ckpt}")

    with safe_open(ckpt, "pt") as f:
        meta = f.metadata() or {}
    missing = [k for k in ("config", "mean", "std") if k not in meta]
    if missing:
        raise CheckFailed(f"gmlp->timm: checkpoint metadata lacks {missing} (has {sorted(meta)})")
    mean, std = metadata_float(meta, "mean"), metadata_float(meta, "std")

    sd = load_file(ckpt)
    cfg = timm_gmlp.config_from_state_dict(sd)
    model = timm_gmlp.build(cfg)
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        raise CheckFailed("gmlp->timm: strict load failed: " + " ".join(str(e).split()))
    print(f"gmlp->timm: loaded {ckpt} as {json.dumps(cfg)}, mean {mean:g}, std {std:g}")
    expected = timm_logits(model, mean=mean, std=std)
    if timm_only:
        print(f"gmlp->timm: timm side only, logits {expected.shape}")
        return
    out = os.path.join(workdir, "gmlp_run_logits.npy")
    run_gmlp([gmlp, "eval", "--checkpoint", ckpt, "--limit", str(N_IMAGES), "--logits", out,
              "--threads", "2"])
    compare("gmlp->timm", out, expected)


# timm's other families, small: (name, config, metadata saved with the state_dict, a note gmlp
# must print). build() gives timm's own class for each.
TIMM_KINDS = [
    ("mixer", dict(model="mixer", depth=2, dim=32, ffn=64, token_ffn=24), {}, None),
    ("resmlp", dict(model="resmlp", depth=2, dim=32, ffn=64), {}, None),
    ("vit", dict(model="vit", depth=2, dim=32, ffn=64, heads=4), {"heads": "4"}, None),
    ("vit-192", dict(model="vit", depth=1, dim=192, ffn=384, heads=3), {},
     "reading it with 3, timm's default for width 192"),
    ("vit-avg", dict(model="vit", depth=2, dim=32, ffn=64, heads=4, class_token=False, global_pool="avg"),
     {"heads": "4"}, None),
    ("vit-cls-avg", dict(model="vit", depth=2, dim=32, ffn=64, heads=4, global_pool="avg"), {"heads": "4"}, None),
]


def check_other_kinds(gmlp, workdir, timm_only):
    for name, cfg, meta, note in TIMM_KINDS:
        model = models.build(dict(cfg, img_size=28, in_chans=1, patch_size=4, num_classes=10))
        timm_gmlp.randomize_(model, torch.Generator().manual_seed(1))
        ckpt = os.path.join(workdir, f"timm-{name}.safetensors")
        save_file(model.state_dict(), ckpt, metadata=meta or None)
        expected = timm_logits(model)
        if timm_only:
            print(f"timm->gmlp {name}: timm side only, {type(model).__name__}")
            continue
        out = os.path.join(workdir, f"gmlp_{name}_logits.npy")
        cmd = [gmlp, "eval", "--checkpoint", ckpt, "--limit", str(N_IMAGES), "--logits", out, "--threads", "2"]
        print("$ " + " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise CheckFailed(f"timm->gmlp {name}: gmlp eval exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        if note and note not in proc.stderr:
            raise CheckFailed(f"timm->gmlp {name}: gmlp did not say '{note}' (stderr: {proc.stderr.strip()[-300:]})")
        compare(f"timm->gmlp {name}", out, expected)
        if note:  # predict reads it through the C++ API's Classifier, which says the same
            from PIL import Image
            png = os.path.join(workdir, "image.png")
            Image.fromarray(np.zeros((28, 28), dtype=np.uint8)).save(png)
            proc = subprocess.run([gmlp, "predict", "--checkpoint", ckpt, png, "--threads", "2"],
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode != 0 or note not in proc.stderr:
                raise CheckFailed(f"timm->gmlp {name}: gmlp predict exited {proc.returncode} without "
                                  f"saying '{note}' (stderr: {proc.stderr.strip()[-300:]})")
    if timm_only:
        return
    for preset, sets in (("fmnist-mixer", []), ("fmnist-resmlp", []), ("fmnist-vit", []),
                         ("fmnist-vit", ["global_pool=avg", "class_token=false"])):
        name = preset + "".join(":" + s for s in sets)
        run_dir = os.path.join(workdir, name.replace(":", "-").replace("=", "-"))
        run_gmlp([gmlp, "train", "--preset", preset, "--epochs", "1", "--train-limit", "512",
                  "--eval-limit", "64", "--batch-size", "64", "--out", run_dir, "--overwrite",
                  "--threads", "2", "--seed", "1"] + [a for s in sets for a in ("--set", s)])
        ckpt = os.path.join(run_dir, "checkpoint.safetensors")
        with safe_open(ckpt, "pt") as f:
            meta = f.metadata() or {}
        cfg = json.loads(meta["config"])
        model = models.build(cfg)
        try:
            model.load_state_dict(load_file(ckpt), strict=True)
        except RuntimeError as e:
            raise CheckFailed(f"gmlp->timm {name}: strict load failed: " + " ".join(str(e).split()))
        print(f"gmlp->timm {name}: loaded into timm's {type(model).__name__} with strict=True")
        expected = timm_logits(model, mean=metadata_float(meta, "mean"), std=metadata_float(meta, "std"))
        out = os.path.join(workdir, f"gmlp_{os.path.basename(run_dir)}_logits.npy")
        run_gmlp([gmlp, "eval", "--checkpoint", ckpt, "--limit", str(N_IMAGES), "--logits", out,
                  "--threads", "2"])
        compare(f"gmlp->timm {name}", out, expected)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gmlp", help="path to the gmlp binary")
    parser.add_argument("--workdir", required=True, help="folder for checkpoints and logits")
    parser.add_argument("--timm-only", action="store_true",
                        help="run only the timm side (no binary needed)")
    args = parser.parse_args()
    if not args.timm_only and not (args.gmlp and os.access(args.gmlp, os.X_OK)):
        print(f"FAIL: gmlp binary must be an executable file (got {args.gmlp})")
        return 1
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(2)
    try:
        check_timm_to_gmlp(args.gmlp, args.workdir, args.timm_only)
        check_gmlp_to_timm(args.gmlp, args.workdir, args.timm_only)
        check_other_kinds(args.gmlp, args.workdir, args.timm_only)
    except CheckFailed as e:
        print(f"FAIL: {e}")
        return 1
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: `{' '.join(e.cmd[:2])}` ran longer than {e.timeout:g} s")
        return 1
    print("OK: timm side only" if args.timm_only else
          "OK: timm <-> gmlp logits agree both ways for gMLP, Mixer, ResMLP and ViT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
