#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: small, valid files of every format the harnesses read, made
by the tools a user's files come from (gmlp train and pretrain for checkpoints, Pillow for PNG
and JPEG, the `bible` program for the KJV), plus a few hand-made edge cases.

    fuzz/make_corpus.py --gmlp build-fuzz/gmlp --out build-fuzz/fuzz/seeds

One folder per harness (fuzz_safetensors/, fuzz_image/, ...) under --out. Inputs that carry
several files join them with the separator line of fuzz/fuzz.h. Runs with the project's .venv
Python (Pillow, numpy); the gmlp binary trains two tiny models on Fashion-MNIST (a few seconds).
"""
import argparse
import base64
import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

SPLIT = b"\n--gmlp-fuzz-split--\n"  # fuzz::kSplit
FMNIST = "/usr/share/datasets/fashion-mnist"


def write(out, harness, name, data):
    os.makedirs(os.path.join(out, harness), exist_ok=True)
    with open(os.path.join(out, harness, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors_bytes(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)], in order."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    data = b[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in tensors], meta


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"make_corpus: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return r.stdout


def checkpoints(out, gmlp, work):
    """Tiny image and text checkpoints from gmlp itself, and variants of them."""
    tiny = ["--set", "depth=1", "--set", "dim=8"]
    image_runs = {"gmlp": ["--preset", "fmnist-ti", *tiny, "--set", "ffn=16"],
                  "amlp": ["--preset", "fmnist-amlp", *tiny, "--set", "ffn=16", "--set", "attn_dim=4"],
                  "vit": ["--preset", "fmnist-vit", *tiny, "--set", "ffn=16", "--set", "heads=2"],
                  "cnn": ["--preset", "fmnist-cnn", "--set", "depth=1", "--set", "dim=4"]}
    for kind, args in image_runs.items():
        run([gmlp, "train", *args, "--threads", "1", "--epochs", "1", "--batch-size", "50", "--train-limit", "100",
             "--eval-limit", "50", "--data-dir", FMNIST, "--out", os.path.join(work, kind)])
        ck = open(os.path.join(work, kind, "checkpoint.safetensors"), "rb").read()
        write(out, "fuzz_checkpoint", f"{kind}.safetensors", ck)
        write(out, "fuzz_safetensors", f"{kind}.safetensors", ck)
    state = open(os.path.join(work, "gmlp", "train_state.safetensors"), "rb").read()
    write(out, "fuzz_safetensors", "train_state.safetensors", state)

    # The gMLP without gmlp's metadata, as a timm state_dict is: the loader reads the
    # architecture from the tensor shapes.
    tensors, meta = read_safetensors(os.path.join(work, "gmlp", "checkpoint.safetensors"))
    write(out, "fuzz_checkpoint", "gmlp_no_metadata.safetensors", safetensors_bytes(tensors))
    # The same in F16 and BF16 (the loader converts every floating-point dtype).
    f32 = [(n, np.frombuffer(raw, "<f4")) for n, _, _, raw in tensors]
    shapes = {n: s for n, _, s, _ in tensors}
    write(out, "fuzz_checkpoint", "gmlp_f16.safetensors", safetensors_bytes(
        [(n, "F16", shapes[n], a.astype("<f2").tobytes()) for n, a in f32], meta))
    bf16 = [(n, "BF16", shapes[n], (a.view("<u4") >> 16).astype("<u2").tobytes()) for n, a in f32]
    write(out, "fuzz_checkpoint", "gmlp_bf16.safetensors", safetensors_bytes(bf16, meta))

    # A text model: pretrain on Genesis 1-2 with a tiny vocabulary.
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w") as f:
        for line in run(["bible", "-f", "Gen1:1-Gen2:25"]).splitlines():
            f.write(line.split(" ", 1)[1] + "\n")
    run([gmlp, "pretrain", "--preset", "kjv-gmlp", "--set", "depth=1", "--set", "dim=8", "--set", "ffn=16",
         "--set", "seq_len=16", "--vocab-size", "120", "--corpus", corpus, "--batch-size", "8", "--epochs", "1",
         "--threads", "1", "--out", os.path.join(work, "lm")])
    ck = open(os.path.join(work, "lm", "checkpoint.safetensors"), "rb").read()
    write(out, "fuzz_checkpoint", "text.safetensors", ck)
    write(out, "fuzz_safetensors", "text.safetensors", ck)
    _, meta = read_safetensors(os.path.join(work, "lm", "checkpoint.safetensors"))
    return base64.b64decode(meta["tokenizer"])


def safetensors_edge_cases(out):
    dtypes = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
              "I8": "i1", "U8": "u1", "BOOL": "u1"}
    values = np.array([0, 1, -2, 3.5, 65504, -0.0], dtype=np.float64)
    tensors = []
    for name, np_type in dtypes.items():
        a = values.astype(np_type) if name not in ("U8", "BOOL") else np.abs(values).astype(np_type)
        tensors.append((name.lower(), name, [2, 3], a.tobytes()))
    tensors.append(("bf16", "BF16", [6], (values.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()))
    tensors.append(("scalar", "F32", [], struct.pack("<f", 7.0)))
    tensors.append(("empty", "F32", [0, 4], b""))
    write(out, "fuzz_safetensors", "dtypes.safetensors", safetensors_bytes(tensors, {"format": "pt"}))
    write(out, "fuzz_safetensors", "empty.safetensors", safetensors_bytes([]))
    write(out, "fuzz_safetensors", "nan_inf.safetensors", safetensors_bytes(
        [("x", "F16", [4], np.array([np.nan, np.inf, -np.inf, 6e-8], "<f2").tobytes())]))


def idx(out):
    def images(n, h, w, pixels):
        return struct.pack(">IIII", 0x803, n, h, w) + pixels

    def labels(values):
        return struct.pack(">II", 0x801, len(values)) + bytes(values)

    with gzip.open(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz")) as f:
        f.read(16)
        real = f.read(3 * 28 * 28)
    with gzip.open(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz")) as f:
        f.read(8)
        real_labels = list(f.read(3))
    cases = {
        "fmnist3": (images(3, 28, 28, real), labels(real_labels)),
        "small": (images(2, 3, 2, bytes(range(12))), labels([0, 9])),
        "empty": (images(0, 28, 28, b""), labels([])),
    }
    for name, (im, lb) in cases.items():
        write(out, "fuzz_idx", f"{name}.raw", im + SPLIT + lb)
        write(out, "fuzz_idx", f"{name}.gz", gzip.compress(im, mtime=0) + SPLIT + gzip.compress(lb, mtime=0))
    write(out, "fuzz_idx", "mixed", gzip.compress(cases["small"][0], mtime=0) + SPLIT + cases["small"][1])


def cifar(out):
    rng = np.random.default_rng(0)
    records = b"".join(bytes([label]) + rng.integers(0, 256, 3072, dtype=np.uint8).tobytes() for label in (3, 9))
    names = "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n"
    write(out, "fuzz_cifar", "two", records + SPLIT + names.encode())
    write(out, "fuzz_cifar", "crlf_names", records[:3073] + SPLIT + names.replace("\n", " \r\n").encode())
    write(out, "fuzz_cifar", "no_names", records[:3073])


def images(out):
    yy, xx = np.mgrid[0:13, 0:9]
    g = (xx * 20 + yy * 7) % 256
    gray = g.astype(np.uint8)
    rgb = np.stack([g, 255 - g, (g * 3) % 256], axis=-1).astype(np.uint8)

    def save(img, fmt, **kw):
        b = io.BytesIO()
        img.save(b, fmt, **kw)
        return b.getvalue()

    def image(mode, a):
        return Image.frombytes(mode, (a.shape[1], a.shape[0]), np.ascontiguousarray(a).tobytes())

    rgba = np.dstack([rgb, gray])
    cases = {
        "gray.png": save(image("L", gray), "PNG"),
        "rgb.png": save(image("RGB", rgb), "PNG"),
        "rgba.png": save(image("RGBA", rgba), "PNG"),
        "la.png": save(image("LA", np.dstack([gray, gray])), "PNG"),
        "gray16.png": save(image("I;16", gray.astype("<u2") * 257), "PNG"),
        "bilevel.png": save(image("L", gray).convert("1"), "PNG"),
        "palette.png": save(image("RGB", rgb).convert("P", palette=Image.Palette.ADAPTIVE, colors=16), "PNG",
                            transparency=3),
        "text_chunk.png": save(image("L", gray), "PNG", pnginfo=_png_text()),
        "gray.jpg": save(image("L", gray), "JPEG", quality=90),
        "rgb420.jpg": save(image("RGB", rgb), "JPEG", quality=80, subsampling=2),
        "rgb444.jpg": save(image("RGB", rgb), "JPEG", quality=95, subsampling=0),
        "progressive.jpg": save(image("RGB", rgb), "JPEG", progressive=True),
        "restart.jpg": save(image("RGB", rgb), "JPEG", restart_marker_blocks=1),
        "cmyk.jpg": save(image("CMYK", rgba), "JPEG"),
        "p5.pgm": b"P5\n# a comment\n9 13\n255\n" + gray.tobytes(),
        "p5_16.pgm": b"P5 9 13 65535\n" + (gray.astype(">u2") * 257).tobytes(),
        "p5_15.pgm": b"P5 9 13 15\n" + (gray // 17).tobytes(),
        "p6.ppm": b"P6\n9 13\n255\n" + rgb.tobytes(),
    }
    # The DHT segment with more codes than a table holds (tests/test_io.cpp has the same file).
    counts = 16 * 17
    dht = b"\xff\xd8\xff\xc4" + struct.pack(">H", 2 + 1 + 16 + counts) + b"\x00" + bytes([17]) * 16
    cases["bad_dht.jpg"] = dht + bytes(i & 255 for i in range(counts)) + b"\xff\xd9"
    for name, data in cases.items():
        write(out, "fuzz_image", name, data)


def _png_text():
    from PIL import PngImagePlugin
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "gmlp")
    info.add_text("Big", "x" * 200, zip=True)
    info.add_itxt("Lang", "ünïcode", lang="de", tkey="Sprache", zip=True)
    return info


def configs(out):
    cases = {
        "train.json": {"epochs": 30, "random-erase": 0.25, "set": ["gate=additive", "depth=2"], "json": True,
                       "preset": "fmnist-s", "lr": 1e-3, "mixup": 0.8},
        "flags.json": {"json": False, "resume": "runs/x", "threads": 2, "seed": 7},
        "nested.json": {"set": [["depth=1"], ["dim=8"]], "epochs": [3]},
        "empty.json": {},
        "null.json": {"epochs": None},
        "object_value.json": {"epochs": {"a": 1}},
        "unknown.json": {"nope": 1},
        "pretrain.json": {"preset": "kjv-gmlp", "vocab-size": 300, "corpus": "c.txt", "nsp": True, "mask-prob": 0.15},
        "compare.json": {"epochs": 1, "train-limit": 100, "out": "runs/cmp"},
    }
    for name, c in cases.items():
        write(out, "fuzz_config", name, json.dumps(c))
    write(out, "fuzz_config", "array.json", "[1, 2]")
    write(out, "fuzz_config", "deep.json", "[" * 80 + "]" * 80)
    write(out, "fuzz_config", "unicode.json", '{"set": ["gate=\\u00fcber"], "out": "caf\\u00e9"}')


def corpus(out):
    genesis = run(["bible", "-f", "Gen1:1-Gen1:31"])
    write(out, "fuzz_corpus", "genesis1.txt", genesis)
    write(out, "fuzz_corpus", "genesis_chapter_change.txt", run(["bible", "-f", "Gen1:30-Gen2:3"]))
    write(out, "fuzz_corpus", "book_change.txt", run(["bible", "-f", "Ge50:25-Exo1:2"]))
    write(out, "fuzz_corpus", "revelation_end.txt", run(["bible", "-f", "Rev22:19-Rev22:21"]))
    write(out, "fuzz_corpus", "plain.txt", "first document\r\n\n  \t\nsecond, with ünïcode\nthird")
    write(out, "fuzz_corpus", "blank.txt", " \n\t\r\n")


def tokenizer(out, model):
    texts = {"plain": "In the beginning God created the heaven and the earth.",
             "unicode": "Grüße, 東京 \U0001F642 \t tabs and [MASK] [CLS]",
             "empty": ""}
    for name, text in texts.items():
        write(out, "fuzz_tokenizer", f"trained_{name}", SPLIT + text.encode())
        write(out, "fuzz_tokenizer", f"model_{name}", model + SPLIT + text.encode())
    write(out, "fuzz_tokenizer", "ids", SPLIT + struct.pack("<6i", 0, 1, 5, 6, 7, 200))


def serve(out):
    """gmlp serve's request bodies (fuzz_serve: an image model 1x4x4, text models of 8 tokens)."""
    image = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 4, 4], "data": [0.5] * 16}]}
    write(out, "fuzz_serve", "image_flat.json", json.dumps(image))
    nested = {"id": "r1", "inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 1, 4, 4],
                                      "data": [[[[0.0, 0.25, 0.5, 1.0]] * 4]] * 2}],
              "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}
    write(out, "fuzz_serve", "image_nested_binary_out.json", json.dumps(nested))
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 4, 4],
                                     "parameters": {"binary_data_size": 64}}],
                         "parameters": {"binary_data_output": True}}).encode()
    write(out, "fuzz_serve", "image_binary", header + SPLIT + struct.pack("<16f", *[i / 16 for i in range(16)]))
    ids = {"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [2, 5],
                       "data": [[2, 7, 4, 9, 3], [2, 11, 12, 4, 3]]}]}
    write(out, "fuzz_serve", "ids.json", json.dumps(ids))
    header = json.dumps({"inputs": [{"name": "input_ids", "datatype": "INT32", "shape": [1, 3],
                                     "parameters": {"binary_data_size": 12}}]}).encode()
    write(out, "fuzz_serve", "ids_binary", header + SPLIT + struct.pack("<3i", 2, 4, 3))
    write(out, "fuzz_serve", "fill_mask.json", json.dumps({"inputs": "And God said, Let there be [MASK].",
                                                           "parameters": {"top_k": 3}}))
    write(out, "fuzz_serve", "texts.json", json.dumps({"inputs": ["a text", {"text": "a", "text_pair": "b"}]}))
    write(out, "fuzz_serve", "pairs.json", json.dumps({"inputs": [{"text": "a", "text_pair": "b"}]}))
    write(out, "fuzz_serve", "top", "3")
    write(out, "fuzz_serve", "deep.json", "[" * 80 + "]" * 80)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gmlp", required=True, help="the gmlp binary that trains the checkpoints")
    ap.add_argument("--out", required=True, help="the folder of seed folders (replaced)")
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="gmlp_corpus_") as work:
        model = checkpoints(args.out, os.path.abspath(args.gmlp), work)
    safetensors_edge_cases(args.out)
    idx(args.out)
    cifar(args.out)
    images(args.out)
    configs(args.out)
    corpus(args.out)
    tokenizer(args.out, model)
    serve(args.out)
    counts = {h: len(os.listdir(os.path.join(args.out, h))) for h in sorted(os.listdir(args.out))}
    print("seed corpora in", args.out + ":", ", ".join(f"{h} {n}" for h, n in counts.items()))


if __name__ == "__main__":
    main()
