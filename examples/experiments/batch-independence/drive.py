#!/usr/bin/python3
"""Drives the batch-independence experiment (see ./run for what it measures).

    drive.py --maitre BIN --zoo DIR --out FILE

Starts one `maitre serve` on loopback, stops it (and its workers) before it
returns, also on an error. Only the standard library and numpy are used.
"""

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

MODELS = os.environ.get("MODELS", "fmnist-mlp fmnist-cnn-wide").split()
WORKERS = os.environ.get("WORKERS", "cpu-2:1")
ROWS = int(os.environ.get("ROWS", 500))               # distinct validation images
NORMAL_CLIENTS = int(os.environ.get("NORMAL_CLIENTS", 8))
EXTREME_CLIENTS = int(os.environ.get("EXTREME_CLIENTS", 2))
ANSWERS = int(os.environ.get("ANSWERS", 6000))        # normal answers per phase
LATENCY_MS = float(os.environ.get("LATENCY_MS", 50))  # lets the worker hold queries for a batch
# A normal answer's logits "moved" when one differs by more than this from
# the same row's answer alone (float kernels differ by ~1e-5 between batch
# sizes, an int8 layer after them by up to one quantisation step, ~2.6e-3 on
# the wide CNN; the int8 damage was whole units).
LOGIT_TOLERANCE = 1e-3
FLT_MAX = 3.4028234663852886e38


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def wait_for(what, check, timeout_s, alive):
    deadline = time.time() + timeout_s
    while not check():
        alive()
        if time.time() > deadline:
            raise SystemExit("drive: gave up waiting for " + what)
        time.sleep(1)


class Server:
    def __init__(self, maitre, data_dir, log_path):
        self.log = open(log_path, "w")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        # Port 0: the server picks free ports and writes them to endpoints.json.
        self.proc = subprocess.Popen(
            [maitre, "serve", "--data-dir", data_dir, "--http", "127.0.0.1:0",
             "--grpc", "127.0.0.1:0", "--workers", WORKERS,
             "--model-autoscaler", "off", "--cluster-autoscaler", "false",
             "--migrate-interfered", "false", "--profile-sweeps", "1"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        endpoints = os.path.join(data_dir, "endpoints.json")
        wait_for("the server's endpoints", lambda: os.path.exists(endpoints), 300, self.alive)
        with open(endpoints) as f:
            self.url = json.load(f)["http"]
        self.port = int(self.url.rsplit(":", 1)[1])
        wait_for("the server", self.ready, 300, self.alive)

    def alive(self):
        if self.proc.poll() is not None:
            raise SystemExit("drive: maitre serve exited; see " + self.log.name)

    def ready(self):
        try:
            return get_json(self.url + "/v2/health/ready")["ready"]
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def json_body(row, parameters):
    return json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                   "data": [float(v) for v in row.ravel()]}],
                       "parameters": parameters}).encode()


def binary_body(row, parameters):
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32",
                                     "shape": [1, 1, 28, 28],
                                     "parameters": {"binary_data_size": 784 * 4}}],
                         "parameters": parameters}).encode()
    return header + row.astype("<f4").tobytes(), len(header)


def extreme_rows():
    """The attack: rows far outside the images' range, JSON-encodable."""
    rng = np.random.default_rng(3)
    shape = (1, 28, 28)
    signs = np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32)
    return {"+1e30": np.full(shape, 1e30, np.float32), "-1e30": np.full(shape, -1e30, np.float32),
            "±1e30": signs * 1e30, "±FLT_MAX": signs * np.float32(FLT_MAX),
            "1e-30": np.full(shape, 1e-30, np.float32), "zeros": np.zeros(shape, np.float32)}


def non_finite_rows():
    """Rows only the binary form can carry; each must be refused with 400."""
    base = np.zeros((1, 28, 28), np.float32)
    rows = {}
    for name, value in (("NaN", np.nan), ("+Inf", np.inf), ("-Inf", -np.inf)):
        row = base.copy()
        row[0, 14, 14] = value
        rows[name] = row
    rows["all NaN"] = np.full((1, 28, 28), np.nan, np.float32)
    return rows


def post(conn, path, body, json_length=None):
    headers = {"Content-Type": "application/json"}
    if json_length is not None:
        headers["Inference-Header-Content-Length"] = str(json_length)
        headers["Content-Type"] = "application/octet-stream"
    conn.request("POST", path, body=body, headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


def logits_of(payload):
    out = json.loads(payload)
    return (out["model_version"], np.array(out["outputs"][0]["data"], np.float64),
            out["parameters"]["batch_size"])


def reference(server, model, images, variants):
    """Each row's answer alone from each variant: one query at a time."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    ref = {}
    for v in variants:
        path = "/v2/models/%s:%s/infer" % (model, v)
        answers = []
        for r in range(ROWS):
            status, payload = post(conn, path, json_body(images[r], {}))
            if status != 200:
                raise SystemExit("drive: reference row %d on %s: %d %s" % (r, v, status, payload))
            version, logits, batch = logits_of(payload)
            if batch != 1:
                raise SystemExit("drive: a lone reference query ran in a batch of %d" % batch)
            answers.append(logits)
        ref[v] = np.array(answers)
        log("  reference answers of %s:%s: %d rows" % (model, v, ROWS))
    conn.close()
    return ref


def phase(server, name, target, attack_bodies, images, ref):
    """NORMAL_CLIENTS send validation images to `target` while
    EXTREME_CLIENTS send `attack_bodies` (body, json_length, kind) to it (no
    one when there are none), until ANSWERS normal answers have come back."""
    path = "/v2/models/%s/infer" % target
    params = {"latency_ms": LATENCY_MS}
    bodies = [json_body(images[r], params) for r in range(ROWS)]
    stop = threading.Event()
    lock = threading.Lock()
    s = {"answers": 0, "wrong_class": 0, "logits_moved": 0, "max_logit_diff": 0.0,
         "normal_failures": {}, "batched_answers": 0, "largest_batch": 0, "served_by": {},
         "attack_statuses": {}}

    def count(key, table):
        table[key] = table.get(key, 0) + 1

    def normal(seed):
        rng = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        while not stop.is_set():
            r = rng.randrange(ROWS)
            status, payload = post(conn, path, bodies[r])
            with lock:
                if status != 200:
                    count("%d %s" % (status, payload[:120].decode(errors="replace")),
                          s["normal_failures"])
                    continue
                version, logits, batch = logits_of(payload)
                alone = ref[version][r]
                diff = float(np.max(np.abs(logits - alone)))
                s["answers"] += 1
                count(version, s["served_by"])
                s["wrong_class"] += int(np.argmax(logits) != np.argmax(alone))
                s["logits_moved"] += int(diff > LOGIT_TOLERANCE)
                s["max_logit_diff"] = max(s["max_logit_diff"], diff)
                s["batched_answers"] += int(batch > 1)
                s["largest_batch"] = max(s["largest_batch"], batch)
                if s["answers"] >= ANSWERS:
                    stop.set()
        conn.close()

    def attacker(seed):
        rng = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        while not stop.is_set():
            body, json_length, kind = rng.choice(attack_bodies)
            status, _ = post(conn, path, body, json_length)
            with lock:
                count("%s: %d" % (kind, status), s["attack_statuses"])
        conn.close()

    threads = [threading.Thread(target=normal, args=(i,)) for i in range(NORMAL_CLIENTS)]
    threads += [threading.Thread(target=attacker, args=(100 + i,))
                for i in range(EXTREME_CLIENTS if attack_bodies else 0)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s["seconds"] = round(time.time() - start, 1)
    s["max_logit_diff"] = float("%.3g" % s["max_logit_diff"])
    log("  %s: %d normal answers (%d in batches > 1, largest %d), %d wrong class, %d with logits "
        "moved > %g, %d normal queries failed; attack: %s"
        % (name, s["answers"], s["batched_answers"], s["largest_batch"], s["wrong_class"],
           s["logits_moved"], LOGIT_TOLERANCE, sum(s["normal_failures"].values()),
           s["attack_statuses"]))
    return s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--maitre", required=True)
    p.add_argument("--zoo", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    valset = np.load(os.path.join(args.zoo, "valset.npz"))
    images = valset["inputs"][:ROWS].astype(np.float32)
    params = {"latency_ms": LATENCY_MS}
    extremes = [(json_body(row, params), None, kind) for kind, row in extreme_rows().items()]
    non_finite = [binary_body(row, params) + (kind,) for kind, row in non_finite_rows().items()]
    # A JSON number beyond FP32's range would become an infinity.
    overflow = json_body(np.ones((1, 28, 28), np.float32), params).replace(b"1.0,", b"1e39,", 1)
    non_finite.append((overflow, None, "JSON 1e39"))

    result = {"workers": WORKERS, "rows": ROWS, "normal_clients": NORMAL_CLIENTS,
              "extreme_clients": EXTREME_CLIENTS, "latency_ms": LATENCY_MS,
              "logit_tolerance": LOGIT_TOLERANCE, "models": {}}
    with tempfile.TemporaryDirectory(prefix="maitre-batch-independence-") as work:
        server = Server(args.maitre, os.path.join(work, "data"), os.path.join(work, "serve.log"))
        try:
            for model in MODELS:
                subprocess.run(
                    [args.maitre, "register", "--server", server.url, "--app", "fashion",
                     "--name", model, "--model", os.path.join(args.zoo, model + ".pt"),
                     "--onnx", os.path.join(args.zoo, model + ".onnx"),
                     "--valset", os.path.join(args.zoo, "valset.npz"),
                     "--meta", os.path.join(args.zoo, "meta.json")],
                    check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

            def variants(model, states=("ready",)):
                app = get_json(server.url + "/v2/apps/fashion")
                return [v for m in app["models"] if m["name"] == model for v in m["variants"]
                        if v["state"] in states]

            def profiled():
                vs = [v for m in MODELS for v in variants(m, ("pending", "ready"))]
                return vs and all(v["state"] == "ready" and v.get("profiles") for v in vs)

            log("registered %s; waiting for their variants' profiles" % ", ".join(MODELS))
            wait_for("the profiles", profiled, 1800, server.alive)
            for model in MODELS:
                names = [v["variant"] for v in variants(model)]
                if "torch-int8" not in names:
                    raise SystemExit("drive: %s has no ready torch-int8 variant (%s)"
                                     % (model, names))
                ref = reference(server, model, images, names)
                log("%s: %d normal and %d extreme clients, latency_ms %g"
                    % (model, NORMAL_CLIENTS, EXTREME_CLIENTS, LATENCY_MS))
                int8 = model + ":torch-int8"
                result["models"][model] = {"variants": names, "phases": {
                    # The control: how far batching alone moves the answers.
                    "int8_pinned_no_attack": phase(
                        server, "int8 pinned, no attack", int8, [], images, ref),
                    "int8_pinned_extreme_rows": phase(
                        server, "int8 pinned, extreme rows", int8, extremes, images, ref),
                    "model_name_extreme_rows": phase(
                        server, "model name, extreme rows", model, extremes, images, ref),
                    "int8_pinned_non_finite_rows": phase(
                        server, "int8 pinned, NaN/Inf rows", int8, non_finite, images, ref),
                }}
        finally:
            server.stop()
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
        f.write("\n")

if __name__ == "__main__":
    main()
