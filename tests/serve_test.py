#!/usr/bin/env python3
"""gmlp serve end to end: tiny checkpoints made with gmlp train, pretrain and finetune (and a
timm-shaped gMLP-Ti/16 with random weights), each served on an ephemeral port, and every route
hit with real HTTP clients: Python's http.client, NVIDIA's tritonclient for the KServe v2 routes,
and schemathesis against the served OpenAPI description. Logits are held to gmlp eval --logits
(1e-4), a batched request to the same one run alone (1e-5), the classify route to gmlp predict,
fill-mask and classify-text to their commands; every client mistake must get its 4xx and the
JSON error; SIGTERM must answer what is in flight and exit 0 within 10 s.

    tests/serve_test.py --gmlp build/gmlp --workdir build/serve_test
"""
import argparse
import concurrent.futures as futures
import gzip
import http.client
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FMNIST = "/usr/share/datasets/fashion-mnist"
KEY = "sesame"
AUTH = {"Authorization": "Bearer " + KEY}  # tritonclient adds its headers to the dict it is given: pass copies

failures = []


def check(name, cond, detail=""):
    print(("ok    " if cond else "FAIL  ") + name + ("" if cond else ": " + str(detail)[:600]), flush=True)
    if not cond:
        failures.append(name)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"serve_test: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    return r.stdout


running = []  # servers to kill if the test itself fails


class Server:
    """gmlp serve on an ephemeral port; its stderr collected."""

    def __init__(self, gmlp, checkpoint, *args):
        self.proc = subprocess.Popen([gmlp, "serve", "--checkpoint", checkpoint, "--port", "0", "--threads", "1",
                                      *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        running.append(self.proc)
        self.log = []
        line = self.proc.stderr.readline()
        self.log.append(line)
        m = re.search(r"listening on http://([0-9.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"serve_test: gmlp serve did not say where it listens: {line!r}{self.proc.stderr.read()[-800:]}")
        self.host, self.port = m.group(1), int(m.group(2))
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    @property
    def url(self):
        return f"{self.host}:{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def json(self, method, path, payload=None, headers=None):
        body = None if payload is None else (payload if isinstance(payload, (bytes, str)) else json.dumps(payload))
        status, hdrs, data = self.request(method, path, body, {**AUTH, **(headers or {})})
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data

    def wait_ready(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            if self.request("GET", "/health")[0] == 200:
                return
            time.sleep(0.02)
        sys.exit("serve_test: gmlp serve did not become ready: " + "".join(self.log)[-800:])

    def stop(self):
        """SIGTERM; returns (exit status, seconds to exit)."""
        t = time.time()
        self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(t)

    def wait_exit(self, since):
        """Waits for the process to exit; returns (exit status, seconds since `since`)."""
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "killed after 20 s"
        return rc, time.time() - since


def is_error(status, body, code):
    """The JSON error of the given status: {"error": {"code", "message", "type"}}, one line."""
    return (status == code and isinstance(body, dict) and set(body) == {"error"}
            and set(body["error"]) == {"code", "message", "type"} and body["error"]["code"] == code
            and "\n" not in body["error"]["message"] and body["error"]["message"])


def metrics(server):
    status, _, data = server.request("GET", "/metrics", headers=dict(AUTH))
    values = {}
    for line in data.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return status, values


def fmnist_test_images(n):
    with gzip.open(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz")) as f:
        data = f.read()
    return np.frombuffer(data, np.uint8, count=n * 784, offset=16).reshape(n, 1, 28, 28)


def v2_body(pixels, **extra):
    return {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(pixels.shape),
                        "data": pixels.reshape(-1).tolist()}], **extra}


def png_bytes(array_hwc):
    out = io.BytesIO()
    Image.fromarray(array_hwc).save(out, format="PNG")
    return out.getvalue()


# --- the image classifier ----------------------------------------------------------------------

def image_tests(gmlp, work):
    import tritonclient.http as triton

    ck = os.path.join(work, "img", "checkpoint.safetensors")
    run([gmlp, "train", "--preset", "fmnist-ti", "--epochs", "1", "--train-limit", "500", "--eval-limit", "100",
         "--batch-size", "100", "--seed", "5", "--threads", "2", "--out", os.path.join(work, "img"), "--overwrite"])
    n = 16
    run([gmlp, "eval", "--checkpoint", ck, "--limit", str(n), "--logits", os.path.join(work, "logits.npy"),
         "--threads", "1"])
    expected = np.load(os.path.join(work, "logits.npy"))
    pixels = fmnist_test_images(n).astype(np.float32) / 255

    # Images for /v1/classify and predict: two test images as PNG, and one as a larger RGB JPEG.
    files = []
    for i in range(2):
        files.append(os.path.join(work, f"fm{i}.png"))
        Image.fromarray(fmnist_test_images(2)[i, 0]).save(files[-1])
    files.append(os.path.join(work, "big.jpg"))
    Image.fromarray(fmnist_test_images(3)[2, 0]).convert("RGB").resize((90, 70)).save(files[-1], quality=90)
    predicted = {}
    for line in run([gmlp, "predict", "--checkpoint", ck, "--top", "3", *files]).splitlines():
        path, rest = line.split(": ", 1)
        predicted[path] = [p.rsplit(" ", 1)[0] for p in rest.split(", ")]

    s = Server(gmlp, ck, "--model-name", "fm", "--api-key", KEY, "--max-batch", "8", "--max-queue-delay-us", "3000",
               "--max-body-mib", "1", "--http-threads", "24")
    s.wait_ready()

    # Health and metadata; the health routes are open, the rest need the key.
    st, _, body = s.request("GET", "/health")
    check("GET /health: 200 {\"status\": \"ok\"}", st == 200 and json.loads(body) == {"status": "ok"}, body)
    for path in ("/v2/health/live", "/v2/health/ready"):
        check(f"GET {path} without a key: 200", s.request("GET", path)[0] == 200)
    st, body = s.json("GET", "/v2", headers={"Authorization": "Bearer wrong"})
    check("GET /v2 with a wrong key: 401", is_error(st, body, 401), body)
    st, _, body = s.request("GET", "/v2/models/fm")
    check("GET /v2/models/fm without a key: 401", is_error(st, json.loads(body), 401), body)
    st, body = s.json("GET", "/v2")
    check("GET /v2: server metadata", st == 200 and body["name"] == "gmlp" and "binary_tensor_data" in body["extensions"],
          body)
    st, body = s.json("GET", "/v2/models/fm")
    check("GET /v2/models/fm: input (-1, 1, 28, 28) FP32, logits (-1, 10) FP32",
          st == 200 and body["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
          and body["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}], body)
    check("GET /v2/models/fm/ready: 200", s.json("GET", "/v2/models/fm/ready")[0] == 200)
    st, _, body = s.request("GET", "/openapi.json", headers=dict(AUTH))
    check("GET /openapi.json is docs/openapi.json", st == 200 and body == open(os.path.join(ROOT, "docs/openapi.json"),
                                                                               "rb").read())

    # tritonclient, binary tensors (its default) and JSON, against gmlp eval --logits.
    client = triton.InferenceServerClient(url=s.url)
    check("tritonclient: server live and ready, model ready",
          client.is_server_live(headers=dict(AUTH)) and client.is_server_ready(headers=dict(AUTH))
          and client.is_model_ready("fm", headers=dict(AUTH)))
    meta = client.get_model_metadata("fm", headers=dict(AUTH))
    check("tritonclient: model metadata", meta["inputs"][0]["name"] == "input", meta)
    for binary in (True, False):
        got = []
        for start in range(0, n, 8):
            inp = triton.InferInput("input", [8, 1, 28, 28], "FP32")
            inp.set_data_from_numpy(pixels[start:start + 8], binary_data=binary)
            out = triton.InferRequestedOutput("logits", binary_data=binary)
            try:
                got.append(client.infer("fm", [inp], outputs=[out], headers=dict(AUTH)).as_numpy("logits"))
            except triton.InferenceServerException as e:
                got.append(np.array([repr(e.message())]))
        got = np.concatenate(got) if all(g.dtype == np.float32 for g in got) else got
        check(f"tritonclient infer ({'binary' if binary else 'JSON'} tensors): logits equal gmlp eval --logits (1e-4)",
              isinstance(got, np.ndarray) and got.shape == expected.shape and np.abs(got - expected).max() <= 1e-4,
              got if not isinstance(got, np.ndarray) else f"worst {np.abs(got - expected).max()}")
    client.close()

    # Plain HTTP: nested data, an id echoed, a versioned path.
    st, body = s.json("POST", "/v2/models/fm/versions/1/infer",
                      {"id": "r7", "inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 1, 28, 28],
                                               "data": pixels[:2].tolist()}]})
    got = np.array(body["outputs"][0]["data"], np.float32).reshape(body["outputs"][0]["shape"]) if st == 200 else None
    check("POST /v2/models/fm/versions/1/infer, nested data: logits equal eval's, id echoed",
          st == 200 and body["id"] == "r7" and np.abs(got - expected[:2]).max() <= 1e-4, body)

    # Alone, then 16 at once (batched by the server): the same logits (1e-5), and batches formed.
    def infer_one(i):
        st, body = s.json("POST", "/v2/models/fm/infer", v2_body(pixels[i:i + 1]))
        return np.array(body["outputs"][0]["data"], np.float32) if st == 200 else body

    alone = [infer_one(i) for i in range(n)]
    _, before = metrics(s)
    with futures.ThreadPoolExecutor(n) as pool:
        together = list(pool.map(infer_one, range(n)))
    _, after = metrics(s)
    rows = after["gmlp_inference_count_total"] - before["gmlp_inference_count_total"]
    execs = after["gmlp_inference_exec_count_total"] - before["gmlp_inference_exec_count_total"]
    check("16 concurrent requests: answered, in batches (inference count / exec count > 1)",
          all(isinstance(t, np.ndarray) for t in together) and rows == n and execs < n, f"{rows} rows in {execs} batches")
    worst = max(float(np.abs(a - t).max()) for a, t in zip(alone, together) if isinstance(t, np.ndarray))
    check("a batched request's logits equal the same image run alone (1e-5)", worst <= 1e-5, worst)

    # /v1/classify: PNG and a larger RGB JPEG, as predict converts and resizes them.
    for path in files:
        st, body = s.json("POST", "/v1/classify?top=3", open(path, "rb").read(), {"Content-Type": "image/png"})
        labels = [p["label"] for p in body["predictions"]] if st == 200 else body
        probs = [p["probability"] for p in body["predictions"]] if st == 200 else [0]
        check(f"POST /v1/classify {os.path.basename(path)}: gmlp predict's top 3, sorted",
              labels == predicted[path] and probs == sorted(probs, reverse=True), f"{labels} vs {predicted[path]}")
    st, body = s.json("POST", "/v1/classify", open(files[0], "rb").read())
    check("POST /v1/classify: 5 classes by default, probabilities in (0, 1]",
          st == 200 and len(body["predictions"]) == 5 and all(0 < p["probability"] <= 1 for p in body["predictions"]),
          body)

    # Client mistakes: each its 4xx and the JSON error, never a 5xx or a dropped connection.
    good = v2_body(pixels[:1])
    bad = [
        ("malformed JSON", "POST", "/v2/models/fm/infer", b'{"inputs": [', 400),
        ("JSON that is not an object", "POST", "/v2/models/fm/infer", b"[1, 2]", 400),
        ("no inputs", "POST", "/v2/models/fm/infer", {"outputs": []}, 400),
        ("wrong datatype", "POST", "/v2/models/fm/infer",
         {"inputs": [{**good["inputs"][0], "datatype": "INT64"}]}, 400),
        ("wrong shape", "POST", "/v2/models/fm/infer",
         {"inputs": [{**good["inputs"][0], "shape": [1, 3, 28, 28]}]}, 400),
        ("data shorter than the shape", "POST", "/v2/models/fm/infer",
         {"inputs": [{**good["inputs"][0], "data": [0.5] * 100}]}, 400),
        ("a string in the data", "POST", "/v2/models/fm/infer",
         {"inputs": [{**good["inputs"][0], "data": ["x"] * 784}]}, 400),
        ("a batch over --max-batch", "POST", "/v2/models/fm/infer", v2_body(np.zeros((9, 1, 28, 28), np.float32)), 400),
        ("an unknown input name", "POST", "/v2/models/fm/infer", {"inputs": [{**good["inputs"][0], "name": "x"}]}, 400),
        ("an unknown output", "POST", "/v2/models/fm/infer", {**good, "outputs": [{"name": "probs"}]}, 400),
        ("binary size without the header", "POST", "/v2/models/fm/infer",
         {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                      "parameters": {"binary_data_size": 3136}}]}, 400),
        ("an unknown model", "POST", "/v2/models/nope/infer", good, 404),
        ("an unknown version", "POST", "/v2/models/fm/versions/2/infer", good, 404),
        ("an unknown model's metadata", "GET", "/v2/models/nope", None, 404),
        ("an unknown route", "GET", "/v3/nothing", None, 404),
        ("a wrong method", "DELETE", "/v2/models/fm", None, 404),
        ("an undecodable image", "POST", "/v1/classify", b"GIF89a not an image at all", 400),
        ("a truncated PNG", "POST", "/v1/classify", open(files[0], "rb").read()[:60], 400),
        ("an empty image body", "POST", "/v1/classify", b"", 400),
        ("?top=0", "POST", "/v1/classify?top=0", open(files[0], "rb").read(), 400),
        ("?top=abc", "POST", "/v1/classify?top=abc", open(files[0], "rb").read(), 400),
        ("fill-mask on an image model", "POST", "/v1/fill-mask", {"inputs": "a [MASK]"}, 404),
        ("classify-text on an image model", "POST", "/v1/classify-text", {"inputs": "a text"}, 404),
        ("a body over --max-body-mib", "POST", "/v2/models/fm/infer", b"[" + b"0.5, " * 300000 + b"0.5]", 413),
    ]
    for name, method, path, payload, code in bad:
        try:
            st, body = s.json(method, path, payload)
        except (ConnectionError, http.client.HTTPException) as e:
            st, body = None, repr(e)
        check(f"{name}: {code} and the JSON error", is_error(st, body, code), f"{st} {body}")
    st, _, body = s.request("POST", "/v2/models/fm/infer", b'{"inputs": []}' + b"x" * 10,
                            {**AUTH, "Inference-Header-Content-Length": "99"})
    check("Inference-Header-Content-Length past the body: 400", is_error(st, json.loads(body), 400), body)

    # 16 concurrent clients, each a mix of routes, every answer right.
    def client_work(c):
        wrong = []
        for k in range(6):
            i = (c + k) % n
            if k % 3 == 2:
                st, body = s.json("POST", "/v1/classify?top=3", open(files[i % 2], "rb").read())
                if st != 200 or [p["label"] for p in body["predictions"]] != predicted[files[i % 2]]:
                    wrong.append((c, k, st))
            else:
                got = infer_one(i)
                if not isinstance(got, np.ndarray) or np.abs(got - expected[i]).max() > 1e-4:
                    wrong.append((c, k, got))
        return wrong

    with futures.ThreadPoolExecutor(16) as pool:
        wrong = sum(pool.map(client_work, range(16)), [])
    check("16 concurrent clients, 96 requests on two routes: every answer right", not wrong, wrong[:3])

    # Metrics after all that.
    st, m = metrics(s)
    check("GET /metrics: Prometheus text with Triton-like counts, histograms and gauges",
          st == 200 and m["gmlp_inference_count_total"] >= m["gmlp_inference_exec_count_total"] > 0
          and m["gmlp_inference_request_success_total"] > 0
          and m["gmlp_inference_queue_duration_seconds_count"] == m["gmlp_inference_request_success_total"]
          + m["gmlp_inference_request_failure_total"]
          and m["gmlp_inference_compute_duration_seconds_count"] == m["gmlp_inference_exec_count_total"]
          and m['gmlp_http_requests_total{route="/v2/models/{name}/infer",code="400"}'] >= 1
          and m["gmlp_requests_in_flight"] == 1 and m["gmlp_requests_deferred"] == 0 and m["gmlp_model_ready"] == 1
          and all(re.search(r'code="[1-5]\d\d"', k) for k in m if k.startswith("gmlp_http_requests_total"))
          and any(k.startswith('gmlp_http_requests_total{route="/metrics",code="200"') for k in m),
          {k: v for k, v in m.items() if "bucket" not in k})

    # schemathesis: requests generated from the OpenAPI description; none may get a 5xx.
    t = time.time()
    r = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run", f"http://{s.url}/openapi.json",
                        "--checks", "not_a_server_error", "--max-examples", "15", "-H", "Authorization: Bearer " + KEY,
                        "--generation-deterministic", "--request-timeout", "20"],
                       capture_output=True, text=True, cwd=work)
    check(f"schemathesis: no 5xx on any route ({time.time() - t:.0f} s)", r.returncode == 0,
          (r.stdout + r.stderr)[-1500:])
    check("the server is still healthy after the bad requests", s.request("GET", "/health")[0] == 200)

    # SIGTERM with requests in flight: they are answered, then the process exits 0.
    with futures.ThreadPoolExecutor(8) as pool:
        pending = [pool.submit(infer_one, i) for i in range(8)]
        time.sleep(0.002)
        rc, seconds = s.stop()
        answered = [p.result() for p in pending]
    check("SIGTERM: exit 0 within 10 s", rc == 0 and seconds < 10, f"exit {rc} after {seconds:.1f} s")
    check("SIGTERM: the requests in flight were answered",
          all(isinstance(a, np.ndarray) for a in answered), [a for a in answered if not isinstance(a, np.ndarray)][:2])
    try:
        socket_refused = s.request("GET", "/health", timeout=2) is None
    except OSError:
        socket_refused = True
    check("after SIGTERM the port is closed", socket_refused)


# --- a timm-shaped gMLP-Ti/16: 503 while it loads, a full queue's 429 --------------------------

def timm_tests(gmlp, work):
    import timm
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    ck = os.path.join(work, "gmlp_ti16.safetensors")
    model = timm.create_model("gmlp_ti16_224", pretrained=False)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, ck)
    s = Server(gmlp, ck, "--max-batch", "1", "--max-queue", "1", "--http-threads", "16")
    st, _, body = s.request("GET", "/health")
    check("GET /health while the checkpoint loads: 503 and the JSON error", is_error(st, json.loads(body), 503),
          f"{st} {body}")
    s.wait_ready()
    image = png_bytes((np.random.default_rng(1).random((300, 200, 3)) * 255).astype(np.uint8))
    path = os.path.join(work, "rgb.png")
    open(path, "wb").write(image)
    top = run([gmlp, "predict", "--checkpoint", ck, "--top", "1", path]).split(": ", 1)[1].rsplit(" ", 1)[0]
    st, body = s.json("POST", "/v1/classify?top=1", image)
    check("gMLP-Ti/16: /v1/classify of a 300x200 RGB image is predict's class",
          st == 200 and body["predictions"][0]["label"] == top, f"{body} vs {top}")

    with futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: s.json("POST", "/v1/classify", image), range(12)))
    codes = sorted(a[0] for a in answers)
    full = [a for a in answers if a[0] == 429]
    check("a full queue (--max-queue 1): some requests 429 with the JSON error, the others 200",
          full and all(is_error(st, b, 429) for st, b in full) and set(codes) == {200, 429}, codes)
    _, m = metrics(s)
    check("/metrics counts the 429s", m["gmlp_requests_rejected_total"] == len(full), m.get("gmlp_requests_rejected_total"))

    # SIGTERM while a client keeps sending, as one behind a load balancer would until the balancer
    # sees the server unready: readiness says 503 at once, liveness 200, and every request the
    # client sent is still answered.
    done = threading.Event()

    def client():  # (status or error, when the answer came) of each request
        answers = []
        while not done.is_set():
            try:
                answers.append((s.json("POST", "/v1/classify?top=1", image)[0], time.time()))
            except OSError as e:
                answers.append((repr(e), time.time()))
        return answers

    with futures.ThreadPoolExecutor(1) as pool:
        sending = pool.submit(client)
        time.sleep(0.3)
        t = time.time()
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        probes = {path: s.json("GET", path) for path in ("/v2/health/ready", "/health", "/v2/health/live")}
        done.set()
        answers = sending.result()
    rc, seconds = s.wait_exit(t)
    check("SIGTERM: /v2/health/ready and /health answer 503 with the JSON error while the server drains",
          all(is_error(*probes[p], 503) and "stopping" in probes[p][1]["error"]["message"]
              for p in ("/v2/health/ready", "/health")), probes)
    check("SIGTERM: /v2/health/live still answers 200 while the server drains",
          probes["/v2/health/live"] == (200, {"live": True}), probes["/v2/health/live"])
    check("SIGTERM: every request the client sent was answered 200, those in flight at the signal too",
          {a for a, _ in answers} == {200} and answers[-1][1] > t, [(a, round(when - t, 3)) for a, when in answers])
    check("SIGTERM (gMLP-Ti/16): exit 0 within 10 s", rc == 0 and seconds < 10, f"exit {rc} after {seconds:.1f} s")


# --- text: a masked-language model and a text classifier ---------------------------------------

def text_tests(gmlp, work):
    import tritonclient.http as triton

    corpus = os.path.join(work, "corpus.txt")
    verses = [line.split(" ", 1)[1] for line in run(["bible", "-f", "Gen1:1-Gen5:32"]).splitlines() if " " in line]
    open(corpus, "w").write("\n".join(verses) + "\n")
    run([gmlp, "pretrain", "--preset", "kjv-gmlp", "--set", "depth=1", "--set", "dim=32", "--set", "ffn=64", "--set",
         "seq_len=32", "--vocab-size", "300", "--corpus", corpus, "--batch-size", "8", "--seed", "3", "--threads", "2",
         "--epochs", "1", "--out", os.path.join(work, "lm"), "--overwrite"])
    lm = os.path.join(work, "lm", "checkpoint.safetensors")
    for split, rows in (("train", verses[:40]), ("dev", verses[40:60])):
        with open(os.path.join(work, split + ".tsv"), "w") as f:
            f.write("text\tlabel\n")
            for i, v in enumerate(rows):
                f.write(v.replace("\t", " ") + "\t" + ("early" if i < len(rows) // 2 else "late") + "\n")
    run([gmlp, "finetune", "--init", lm, "--train", os.path.join(work, "train.tsv"), "--dev",
         os.path.join(work, "dev.tsv"), "--epochs", "1", "--batch-size", "8", "--threads", "2", "--out",
         os.path.join(work, "ft"), "--overwrite"])
    ft = os.path.join(work, "ft", "checkpoint.safetensors")

    text = "And God said, Let there be [MASK]."
    expected = json.loads(run([gmlp, "fill-mask", "--checkpoint", lm, "--top", "3", "--json", "--threads", "1", text]))
    s = Server(gmlp, lm, "--model-name", "lm")
    s.wait_ready()
    st, body = s.json("POST", "/v1/fill-mask", {"inputs": text, "parameters": {"top_k": 3}})
    same = st == 200 and len(body) == 3 and all(
        a["token"] == b["token"] and a["token_str"] == b["token_str"] and a["sequence"] == b["sequence"]
        and abs(a["score"] - b["score"]) <= 1e-5 for a, b in zip(body, expected))
    check("POST /v1/fill-mask: gmlp fill-mask --json's tokens and scores", same, f"{body} vs {expected}")
    st, body = s.json("POST", "/v1/fill-mask?top=2", {"inputs": [text, "In the [MASK] God created the [MASK]."]})
    check("POST /v1/fill-mask, a list of texts: a list per text (per mask for two masks)",
          st == 200 and len(body) == 2 and len(body[0]) == 2 and len(body[1]) == 2 and len(body[1][0]) == 2, body)
    st, body = s.json("POST", "/v1/tokenize", {"inputs": text})
    ids = body.get("input_ids") if st == 200 else None
    check("POST /v1/tokenize: [CLS] ... [MASK] ... [SEP]", ids and ids[0] == 2 and ids[-1] == 3 and 4 in ids, body)
    meta = s.json("GET", "/v2/models/lm")[1]
    vocab = meta["outputs"][0]["shape"][2]
    client = triton.InferenceServerClient(url=s.url)
    inp = triton.InferInput("input_ids", [1, len(ids)], "INT64")
    inp.set_data_from_numpy(np.array([ids], np.int64))
    logits = client.infer("lm", [inp]).as_numpy("logits")
    client.close()
    row = logits[0, ids.index(4)].astype(np.float64)
    probs = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    top = np.argsort(-probs, kind="stable")[:3]
    check("tritonclient INT64 ids on the masked-language model: logits (1, n, V) whose softmax at [MASK] is fill-mask's",
          logits.shape == (1, len(ids), vocab) and [int(t) for t in top] == [e["token"] for e in expected]
          and np.abs(probs[top] - [e["score"] for e in expected]).max() <= 1e-5, (logits.shape, top, expected))
    for name, path, payload, code in [
        ("fill-mask without a [MASK]", "/v1/fill-mask", {"inputs": "no mask here"}, 400),
        ("fill-mask past the model's length", "/v1/fill-mask", {"inputs": "and the light [MASK] " * 20}, 400),
        ("fill-mask with inputs of the wrong kind", "/v1/fill-mask", {"inputs": 5}, 400),
        ("fill-mask with top_k 0", "/v1/fill-mask", {"inputs": text, "parameters": {"top_k": 0}}, 400),
        ("token ids outside the vocabulary", "/v2/models/lm/infer",
         {"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, 2], "data": [2, 100000]}]}, 400),
        ("more ids than the model reads", "/v2/models/lm/infer",
         {"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, 40], "data": [2] * 40}]}, 400),
        ("FP32 for token ids", "/v2/models/lm/infer",
         {"inputs": [{"name": "input_ids", "datatype": "FP32", "shape": [1, 2], "data": [2, 3]}]}, 400),
        ("an image to a text model", "/v1/classify", png_bytes(np.zeros((8, 8), np.uint8)), 404),
        ("classify-text on a masked-language model", "/v1/classify-text", {"inputs": "text"}, 404),
    ]:
        st, body = s.json("POST", path, payload)
        check(f"{name}: {code} and the JSON error", is_error(st, body, code), f"{st} {body}")
    rc, seconds = s.stop()
    check("SIGTERM (masked-language model): exit 0 within 10 s", rc == 0 and seconds < 10, f"exit {rc}")

    texts = [verses[1], verses[50]]
    expected = json.loads(run([gmlp, "classify-text", "--checkpoint", ft, "--top", "2", "--json", "--threads", "1",
                               *texts]))
    s = Server(gmlp, ft, "--model-name", "ft", "--max-batch", "4")
    s.wait_ready()
    st, body = s.json("POST", "/v1/classify-text", {"inputs": texts, "parameters": {"top_k": 2}})
    same = st == 200 and len(body) == 2 and all(
        [x["label"] for x in a] == [y["label"] for y in b] and max(abs(x["score"] - y["score"]) for x, y in zip(a, b))
        <= 1e-5 for a, b in zip(body, expected))
    check("POST /v1/classify-text: gmlp classify-text --json's labels and scores", same, f"{body} vs {expected}")
    with futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: s.json("POST", "/v1/classify-text", {"inputs": texts[i % 2],
                                                                               "parameters": {"top_k": 2}}), range(8)))
    check("8 concurrent classify-text requests (batched): each its text's answer",
          all(st == 200 and [x["label"] for x in b] == [y["label"] for y in expected[i % 2]]
              and max(abs(x["score"] - y["score"]) for x, y in zip(b, expected[i % 2])) <= 1e-5
              for i, (st, b) in enumerate(answers)), answers[:2])
    st, body = s.json("POST", "/v1/tokenize", {"inputs": texts})
    ids = body["input_ids"] if st == 200 else []
    n = max(len(i) for i in ids) if ids else 1
    padded = np.array([i + [0] * (n - len(i)) for i in ids], np.int64)
    st, body = s.json("POST", "/v2/models/ft/infer", {"inputs": [{"name": "input_ids", "datatype": "INT64",
                                                                  "shape": list(padded.shape),
                                                                  "data": padded.tolist()}]})
    ok = st == 200 and body["outputs"][0]["shape"] == [2, 2]
    if ok:
        logits = np.array(body["outputs"][0]["data"], np.float64).reshape(2, 2)
        probs = np.exp(logits - logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        labels = meta_labels = s.json("GET", "/v2/models/ft")[1]["parameters"]["labels"]
        for i in range(2):
            for e in expected[i]:
                ok &= abs(probs[i, labels.index(e["label"])] - e["score"]) <= 1e-5
    check("v2 INT64 ids (from /v1/tokenize) on the text classifier: classify-text's scores", ok, body)
    rc, seconds = s.stop()
    check("SIGTERM (text classifier): exit 0 within 10 s", rc == 0 and seconds < 10, f"exit {rc}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gmlp", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    gmlp = os.path.abspath(args.gmlp)
    t = time.time()
    try:
        image_tests(gmlp, args.workdir)
        timm_tests(gmlp, args.workdir)
        text_tests(gmlp, args.workdir)
    finally:
        for proc in running:
            if proc.poll() is None:
                proc.kill()
    print(f"serve_test: {len(failures)} failed in {time.time() - t:.0f} s" + (": " + ", ".join(failures) if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
