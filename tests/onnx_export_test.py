"""`gmlp export` against ONNX's checker, ONNX Runtime and OpenVINO, for every model kind.

    python tests/onnx_export_test.py --gmlp build/gmlp --reference build/tests/gmlp_onnx_reference \
        --workdir /tmp/onnx_export

For each image kind (gMLP with each gate, aMLP, ViT, Mixer, ResMLP, feed-forward-only, EAMLP, the
CNN) and text model (gMLP, aMLP, BERT, BERT with T5 relative positions; masked-language heads,
and finetuned classifiers with segment embeddings), tiny and with random weights everywhere
(gmlp_onnx_reference), the exported file must
  - pass onnx.checker.check_model(full_check=True) (shape inference included), at opset 17 and
    at the newest opset gmlp writes;
  - have a symbolic "batch" first dimension and static others, initializers named by exactly the
    checkpoint's tensor names (less the other text head's), and the checkpoint's normalisation
    and classes (or tokenizer) in its metadata;
  - give gmlp's own logits within 1e-4 (max abs) under ONNX Runtime and OpenVINO (f32: OpenVINO
    runs bf16 on CPUs that have it unless told), at batch 16 and batch 1.
Then the same gMLP weights in timm, exported by torch.onnx.export, must give the same logits, and
the command's errors must be one line with the right exit status.

Exit 0 on success; 1 with a one-line reason on failure. Prints the max abs differences per kind.
"""
import argparse
import base64
import json
import os
import random
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-4  # float32 logits of O(1): the runtimes sum in other orders and fuse ops
MAX_OPSET = 25    # kMaxOpset in src/nn/onnx_graph.h

IMAGE_BASE = dict(img_size=8, in_chans=3, patch_size=2, depth=2, dim=16, ffn=32, num_classes=5,
                  heads=2, token_ffn=12, memory=8, attn_dim=8)
IMAGE_KINDS = {  # name: config changes
    "gmlp": dict(model="gmlp"),
    "gmlp:multiplicative": dict(model="gmlp", gate="multiplicative"),
    "gmlp:additive": dict(model="gmlp", gate="additive"),
    "gmlp:linear": dict(model="gmlp", gate="linear"),
    "amlp": dict(model="amlp"),
    "vit": dict(model="vit"),
    "vit:avg": dict(model="vit", class_token=False, global_pool="avg"),
    "vit:cls_avg": dict(model="vit", global_pool="avg"),
    "mixer": dict(model="mixer"),
    "resmlp": dict(model="resmlp"),
    "ffonly": dict(model="ffonly"),
    "eamlp": dict(model="eamlp"),
    "cnn": dict(model="cnn", dim=4, depth=1, img_size=12),
}
TEXT_BASE = dict(vocab_size=48, seq_len=12, depth=2, dim=16, ffn=32, heads=2, attn_dim=8,
                 rel_buckets=8, rel_max_distance=16)
TEXT_KINDS = {  # name: (config changes, head, finetuning task or None)
    "text gmlp mlm": (dict(model="gmlp"), "mlm", None),
    "text amlp mlm": (dict(model="amlp", gate="multiplicative"), "mlm", None),
    "text bert mlm": (dict(model="bert"), "mlm", None),
    "text bert_rel mlm": (dict(model="bert_rel"), "mlm", None),
    "text gmlp classifier": (dict(model="gmlp", num_classes=3, segments=True), "classifier", "next-verse"),
    "text bert classifier": (dict(model="bert", num_classes=3, segments=True), "classifier", "genre"),
    "text bert_rel nsp": (dict(model="bert_rel", num_classes=2, segments=True), "classifier", None),
}


class CheckFailed(Exception):
    pass


def run(cmd, expect=0):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != expect:
        tail = (proc.stderr.strip() or proc.stdout.strip() or "(no output)").splitlines()[-1]
        raise CheckFailed(f"`{' '.join(cmd[:2])} ...` exited {proc.returncode}, expected {expect}: {tail}")
    return proc


def corpus(path):
    """A small synthetic corpus for the tokenizer: words of a few letters, fixed by a seed."""
    rng = random.Random(5)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(1, 6))) for _ in range(60)]
    with open(path, "w") as f:
        for _ in range(400):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + "\n")


class Runtimes:
    """ONNX Runtime and OpenVINO sessions of one file."""

    def __init__(self, path, input_name):
        import onnxruntime as ort
        import openvino as ov
        self.input_name = input_name
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        self.ort = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        core = ov.Core()
        self.ov = core.compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2})

    def logits(self, x):
        return {"onnxruntime": self.ort.run(["logits"], {self.input_name: x})[0],
                "openvino": self.ov([x])[self.ov.output("logits")]}


def max_diff(name, got, expected):
    if got.shape != expected.shape:
        raise CheckFailed(f"{name}: logits of shape {got.shape}, expected {expected.shape}")
    if not np.abs(expected).max() > 1e-2:
        raise CheckFailed(f"{name}: gmlp's logits are all near zero, so the comparison proves nothing")
    return float(np.abs(got.astype(np.float64) - expected.astype(np.float64)).max())


def check_file(name, path, ckpt, opset, unused=()):
    """The checker, the graph's interface, the initializers' names, the metadata."""
    import onnx
    from safetensors import safe_open
    model = onnx.load(path)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # onnx raises ValidationError and InferenceError
        raise CheckFailed(f"{name}: onnx.checker at opset {opset}: {' '.join(str(e).split())[:300]}")
    if [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] != [opset]:
        raise CheckFailed(f"{name}: opset_import is {model.opset_import}, expected {opset}")
    for v in list(model.graph.input) + list(model.graph.output):
        dims = v.type.tensor_type.shape.dim
        if dims[0].dim_param != "batch" or any(not d.HasField("dim_value") for d in dims[1:]):
            raise CheckFailed(f"{name}: {v.name} must be (batch, static...), got {dims}")
    with safe_open(ckpt, "np") as f:
        keys, meta = set(f.keys()), f.metadata()
    names = {t.name for t in model.graph.initializer}
    if names != keys - set(unused):
        raise CheckFailed(f"{name}: initializers {sorted(names ^ (keys - set(unused)))} differ from the checkpoint's tensors")
    props = {p.key: p.value for p in model.metadata_props}
    if "tokenizer" in meta:
        same = {"config": json.loads(props.get("config", "null")) == json.loads(meta["config"]),
                "tokenizer": base64.b64decode(props.get("tokenizer", "")) == base64.b64decode(meta["tokenizer"])}
    else:
        same = {key: json.loads(props.get(key, "null")) == json.loads(meta[key])
                for key in ("config", "mean", "std", "classes")}
    for key, ok in same.items():
        if not ok:
            raise CheckFailed(f"{name}: metadata '{key}' must be the checkpoint's")
    return model


def check_kind(args, name, ckpt, input_name, export_flags, reference_flags, unused, results):
    work = args.workdir
    slug = name.replace(" ", "_").replace(":", "_")
    worst = {}
    for opset in (17, MAX_OPSET):
        path = os.path.join(work, f"{slug}.opset{opset}.onnx")
        run([args.gmlp, "export", "--checkpoint", ckpt, "--onnx", path, "--opset", str(opset)] + export_flags)
        check_file(name, path, ckpt, opset, unused)
        runtimes = Runtimes(path, input_name)
        for batch, seed in ((16, 1), (1, 2)):
            inputs, expected = os.path.join(work, f"{slug}.x{batch}.npy"), os.path.join(work, f"{slug}.y{batch}.npy")
            cmd = [args.reference, "logits", "--checkpoint", ckpt, "--batch", str(batch), "--seed", str(seed),
                   "--inputs", inputs, "--logits", expected]
            run(cmd + reference_flags)
            x = np.load(inputs)
            x = x.astype(np.int64) if input_name == "ids" else x
            y = np.load(expected)
            for runtime, got in runtimes.logits(x).items():
                d = max_diff(f"{name} {runtime} opset {opset} batch {batch}", got, y)
                worst[runtime] = max(worst.get(runtime, 0.0), d)
                if not d <= TOLERANCE:
                    raise CheckFailed(f"{name}: {runtime} at opset {opset}, batch {batch}: max abs diff {d:.3g} "
                                      f"exceeds {TOLERANCE:g} (|logits| up to {float(np.abs(y).max()):.3g})")
    results[name] = worst
    print(f"{name:22s} onnxruntime {worst['onnxruntime']:.2e}  openvino {worst['openvino']:.2e}", flush=True)


def check_every_opset(args, kinds):
    """Each opset from 17 to the newest: the checker, and ONNX Runtime's logits at batch 1."""
    import onnxruntime as ort
    for opset in range(17, MAX_OPSET + 1):
        for name, (input_name, flags) in kinds.items():
            slug = name.replace(" ", "_").replace(":", "_")
            ckpt, path = os.path.join(args.workdir, slug + ".safetensors"), os.path.join(args.workdir, "every_opset.onnx")
            run([args.gmlp, "export", "--checkpoint", ckpt, "--onnx", path, "--opset", str(opset)] + flags)
            check_file(name, path, ckpt, opset, ["mlm_bias"] if flags else ["cls_head.weight", "cls_head.bias"])
            x = np.load(os.path.join(args.workdir, f"{slug}.x1.npy"))
            got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
                None, {input_name: x.astype(np.int64) if input_name == "ids" else x})[0]
            d = max_diff(f"{name} opset {opset}", got, np.load(os.path.join(args.workdir, f"{slug}.y1.npy")))
            if not d <= TOLERANCE:
                raise CheckFailed(f"{name}: onnxruntime at opset {opset}: max abs diff {d:.3g} exceeds {TOLERANCE:g}")
    print(f"opsets 17..{MAX_OPSET}: {', '.join(kinds)} pass the checker and agree", flush=True)


def check_torch_export(args, ckpt, results):
    """timm's gMLP with the same weights, exported by torch.onnx.export: the same logits."""
    import onnxruntime as ort
    import torch
    from safetensors.torch import load_file
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
    import timm_gmlp
    torch.set_num_threads(2)
    model = timm_gmlp.build({**IMAGE_BASE, "model": "gmlp"}).eval()
    model.load_state_dict(load_file(ckpt), strict=True)
    x = np.load(os.path.join(args.workdir, "gmlp.x16.npy"))
    expected = np.load(os.path.join(args.workdir, "gmlp.y16.npy"))
    path = os.path.join(args.workdir, "gmlp.torch.onnx")
    batch = torch.export.Dim("batch", min=1)
    with torch.inference_mode():
        eager = model(torch.from_numpy(x)).numpy()
    torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["images"], output_names=["logits"],
                      opset_version=18, dynamic_shapes={"x": {0: batch}}, dynamo=True, external_data=False,
                      verbose=False)
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    ours = ort.InferenceSession(os.path.join(args.workdir, "gmlp.opset17.onnx"),
                                providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    d_eager = max_diff("timm eager vs gmlp", eager, expected)
    d_torch = max_diff("torch.onnx.export vs gmlp", theirs, expected)
    d_files = max_diff("torch.onnx.export vs gmlp export", theirs, ours)
    print(f"gmlp in timm: eager vs gmlp {d_eager:.2e}, torch.onnx.export (onnxruntime) vs gmlp {d_torch:.2e}, "
          f"vs gmlp export {d_files:.2e}", flush=True)
    for what, d in (("timm's logits", d_eager), ("torch.onnx.export's logits", d_torch),
                    ("torch.onnx.export's vs gmlp export's logits", d_files)):
        if not d <= TOLERANCE:
            raise CheckFailed(f"gmlp in timm: {what} differ by {d:.3g} (tolerance {TOLERANCE:g})")
    results["torch.onnx.export"] = {"onnxruntime": d_files}


def check_errors(args, image_ckpt, text_ckpt):
    """One line on stderr, exit 1 for a failure and 2 for a usage error (CLI11 adds its hint to
    --help), nothing written."""
    work = args.workdir
    out = os.path.join(work, "error.onnx")
    cases = [
        ("missing checkpoint", ["--checkpoint", os.path.join(work, "nope.safetensors"), "--onnx", out], 1, "nope.safetensors"),
        ("opset 16", ["--checkpoint", image_ckpt, "--onnx", out, "--opset", "16"], 2, "--opset"),
        (f"opset {MAX_OPSET + 1}", ["--checkpoint", image_ckpt, "--onnx", out, "--opset", str(MAX_OPSET + 1)], 2, "--opset"),
        ("--head on an image model", ["--checkpoint", image_ckpt, "--onnx", out, "--head", "mlm"], 1, "text models"),
        ("classifier of an MLM", ["--checkpoint", text_ckpt, "--onnx", out, "--head", "classifier"], 1,
         "no classification head"),
        ("output folder missing", ["--checkpoint", image_ckpt, "--onnx", os.path.join(work, "no", "x.onnx")], 1, "--onnx"),
        ("not a checkpoint", ["--checkpoint", os.path.join(work, "corpus.txt"), "--onnx", out], 1, "corpus.txt"),
    ]
    for name, cmd, status, pattern in cases:
        proc = subprocess.run([args.gmlp, "export"] + cmd, capture_output=True, text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        hint = ["Run with --help for more information."] if status == 2 else []
        if proc.returncode != status or lines[1:] != hint or pattern not in lines[0]:
            raise CheckFailed(f"export with {name}: exit {proc.returncode} (expected {status}), stderr {lines!r} "
                              f"(expected one line naming {pattern!r})")
    if os.path.exists(out):
        raise CheckFailed(f"a failed export wrote {out}")
    leftovers = [f for f in os.listdir(work) if ".tmp." in f]
    if leftovers:
        raise CheckFailed(f"temporary files left behind: {leftovers}")
    print(f"errors: {len(cases)} cases, one line each, exit 1 or 2, nothing written", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gmlp", required=True, help="the gmlp binary")
    parser.add_argument("--reference", required=True, help="the gmlp_onnx_reference binary")
    parser.add_argument("--workdir", required=True, help="folder for checkpoints, models and logits")
    parser.add_argument("--only", help="run only the kinds whose name contains this")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    corpus_path = os.path.join(args.workdir, "corpus.txt")
    corpus(corpus_path)
    results = {}
    try:
        for name, changes in IMAGE_KINDS.items():
            if args.only and args.only not in name:
                continue
            ckpt = os.path.join(args.workdir, name.replace(":", "_") + ".safetensors")
            run([args.reference, "image", "--config", json.dumps({**IMAGE_BASE, **changes}), "--seed", "7", "--out", ckpt])
            check_kind(args, name, ckpt, "images", [], [], (), results)
        for name, (changes, head, task) in TEXT_KINDS.items():
            if args.only and args.only not in name:
                continue
            ckpt = os.path.join(args.workdir, name.replace(" ", "_") + ".safetensors")
            cmd = [args.reference, "text", "--config", json.dumps({**TEXT_BASE, **changes}), "--corpus", corpus_path,
                   "--seed", "9", "--out", ckpt]
            run(cmd + (["--task", task] if task else []))
            unused = ["mlm_bias"] if head == "classifier" else ["cls_head.weight", "cls_head.bias"]
            # --head auto picks the classifier of a finetuned checkpoint, else the masked-language head.
            auto = head == ("classifier" if task else "mlm")
            check_kind(args, name, ckpt, "ids", [] if auto else ["--head", head], ["--head", head], unused, results)
        if not args.only:
            # Between them these use every op type of the exports.
            check_every_opset(args, {"vit": ("images", []), "cnn": ("images", []), "mixer": ("images", []),
                                     "eamlp": ("images", []), "gmlp": ("images", []),
                                     "text bert_rel nsp": ("ids", ["--head", "classifier"])})
            check_torch_export(args, os.path.join(args.workdir, "gmlp.safetensors"), results)
            check_errors(args, os.path.join(args.workdir, "gmlp.safetensors"),
                         os.path.join(args.workdir, "text_gmlp_mlm.safetensors"))
    except CheckFailed as e:
        print(f"FAIL: {e}")
        return 1
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: `{' '.join(e.cmd[:2])}` ran longer than {e.timeout:g} s")
        return 1
    with open(os.path.join(args.workdir, "max_abs_diff.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"OK: {len(results)} checks, every logit within {TOLERANCE:g} of gmlp's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
