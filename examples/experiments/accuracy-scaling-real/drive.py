#!/usr/bin/python3
"""Drives the accuracy-scaling-real experiment (see ./run for what it is).

    drive.py --maitre BIN --zoo DIR --out DIR [--systems a,b,...]

Everything it starts (servers, their workers, the load generators) runs on
loopback and is stopped before it returns, also on Ctrl-C or an error.
Only the Python standard library is used.
"""

import argparse
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request

# ---- the setup (docs/experiments.md, "accuracy-scaling-real") ----
# Each app's load, as a multiple of what the whole cluster carries at full
# accuracy (full_accuracy_capacity): a base, a linear rise to a peak, a hold
# and a fall as long as the rise. The two peaks overlap for a while, when the
# demand is 1.5 times that capacity.
PEAK = float(os.environ.get("PEAK", 0.75))
APPS = {  # app -> (zoo subdirectory, the load's shape)
    "fashion": ("", {"base": 0.2, "peak": PEAK, "rise": (20, 50), "hold": 25}),
    "fashion-coarse": ("coarse", {"base": 0.2, "peak": PEAK, "rise": (45, 75), "hold": 25}),
}
DURATION_S = 150
WARMUP_S = 15
# Rows per query: enough that the models, not the front end, are the cost.
ROWS_PER_QUERY = int(os.environ.get("ROWS", 64))
SLO_MS = float(os.environ.get("SLO_MS", 25))
# The fixed cluster: the local workers, one core each.
WORKERS = os.environ.get("WORKERS", "cpu-1:2")
SEED = 1


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def wait_for(what, check, timeout_s, every_s=1.0, still_alive=None):
    """Polls check() until it returns a true value; says where it stands
    every 30 s. timeout_s bounds waits that would otherwise hang forever
    (a dead server), not how long the work takes: callers pass generous
    values."""
    start = last = time.time()
    while True:
        if still_alive is not None:
            still_alive()
        got = check()
        if got:
            return got
        if time.time() - start > timeout_s:
            raise SystemExit("drive: gave up waiting for %s" % what)
        if time.time() - last > 30:
            log("  ... still waiting for %s" % what)
            last = time.time()
        time.sleep(every_s)


class Server:
    def __init__(self, maitre, data_dir, log_path, extra):
        self.http_port, self.grpc_port = free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % self.http_port
        self.log_file = open(log_path, "w")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [maitre, "serve", "--data-dir", data_dir,
             "--http", "127.0.0.1:%d" % self.http_port,
             "--grpc", "127.0.0.1:%d" % self.grpc_port, "--control", "127.0.0.1:0",
             "--cluster-autoscaler", "false", "--profile-sweeps", "1",
             "--workers", WORKERS] + extra,
            stdout=self.log_file, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
        wait_for("the server to be ready", self.ready, 300, 0.5, self.alive)

    def alive(self):
        if self.proc.poll() is not None:
            raise SystemExit("drive: maitre serve exited (%d); see %s"
                             % (self.proc.returncode, self.log_file.name))

    def ready(self):
        try:
            return http("GET", self.url + "/v2/health/ready")[0] == 200
        except OSError:
            return False

    def get(self, path):
        return json.loads(http("GET", self.url + path)[1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log_file.close()


def worker_types():
    """(type, count) of WORKERS."""
    out = []
    for part in WORKERS.split(","):
        name, _, count = part.partition(":")
        out.append((name, int(count or 1)))
    return out


def zoo_models(zoo, sub):
    with open(os.path.join(zoo, sub, "zoo.json")) as f:
        return [e["name"] for e in json.load(f)]


def profiled(server, app):
    """True once every variant of the app is ready with a final profile on
    every worker type the cluster has."""
    j = server.get("/v2/apps/" + app)
    total = final = 0
    for m in j.get("models", []):
        for v in m["variants"]:
            if v["state"] == "pending":
                return False
            if v["state"] != "ready":
                continue
            for t, _ in worker_types():
                total += 1
                p = v.get("profiles", {}).get(t)
                final += 1 if p is not None and p.get("sweeps_left", 1) == 0 else 0
    return total > 0 and final == total


def setup(args, data_dir):
    """Registers both apps' families and profiles them, once: each system's
    server then starts on a copy of this registry."""
    marker = os.path.join(data_dir, "profiled")
    if os.path.exists(marker):
        log("setup: reusing the profiled registry in %s" % data_dir)
        return
    os.makedirs(data_dir, exist_ok=True)
    log("setup: registering and profiling both apps (a few minutes)")
    server = Server(args.maitre, data_dir, os.path.join(args.out, "setup.log"),
                    ["--model-autoscaler", "off"])
    try:
        for app, (sub, _) in APPS.items():
            d = os.path.join(args.zoo, sub)
            for name in zoo_models(args.zoo, sub):
                subprocess.run(
                    [args.maitre, "register", "--server", server.url, "--app", app,
                     "--name", name, "--model", os.path.join(d, name + ".pt"),
                     "--onnx", os.path.join(d, name + ".onnx"),
                     "--valset", os.path.join(d, "valset.npz"),
                     "--meta", os.path.join(d, "meta.json"), "--json"],
                    check=True, stdout=subprocess.DEVNULL)
        for app in APPS:
            wait_for("the profiles of " + app, lambda: profiled(server, app), 3600, 5,
                     server.alive)
        for app in APPS:
            with open(os.path.join(args.out, app + "-variants.txt"), "wb") as f:
                f.write(http("GET", server.url + "/v2/apps/%s?format=table" % app)[1])
    finally:
        server.stop()
    open(marker, "w").close()


def rate_at(shape, capacity, t):
    """The load's rate at t seconds: `base` × capacity, a linear rise to
    `peak` × capacity over `rise`, held for `hold` s, a linear fall as long
    as the rise, then `base` again."""
    base, peak = shape["base"] * capacity, shape["peak"] * capacity
    r0, r1 = shape["rise"]
    h1 = r1 + shape["hold"]
    f1 = h1 + (r1 - r0)
    if t < r0 or t >= f1:
        return base
    if t < r1:
        return base + (peak - base) * (t - r0) / (r1 - r0)
    if t < h1:
        return peak
    return peak - (peak - base) * (t - h1) / (f1 - h1)


def write_trace(path, shape, capacity, seed):
    """Poisson arrivals at rate_at(t), by thinning a stream at the peak rate."""
    rng = random.Random(seed)
    top = max(shape["base"], shape["peak"]) * capacity
    t, lines = 0.0, []
    while True:
        t += rng.expovariate(top)
        if t >= DURATION_S:
            break
        if rng.random() * top <= rate_at(shape, capacity, t):
            lines.append("%.3f" % (t * 1000))
    with open(path, "w") as f:
        f.write("arrival_ms\n" + "\n".join(lines) + "\n")
    return len(lines)


def full_accuracy_capacity(server, app):
    """Queries per second the cluster carries with the app's most accurate
    model on both workers, from the profiles: the planned capacity that the
    load's shape is scaled by."""
    j = server.get("/v2/apps/" + app)
    best_model = max(j["models"], key=lambda m: max(v["accuracy"] for v in m["variants"]))
    rows = 0
    for t, count in worker_types():
        replicas = count * int(t.rsplit("-", 1)[1])  # a replica per core of a cpu-N worker
        best = 0
        for v in best_model["variants"]:
            p = v.get("profiles", {}).get(t)
            if not p:
                continue
            for pt in p["points"]:
                if pt["p99_ms"] <= SLO_MS / 2 and pt["batch"] >= ROWS_PER_QUERY:
                    best = max(best, pt["batch"] / pt["p50_ms"] * 1000)
        rows += best * replicas
    return rows / ROWS_PER_QUERY


def run_system(args, system, data_dir, capacity):
    out = os.path.join(args.out, system)
    os.makedirs(out, exist_ok=True)
    work = os.path.join(out, "data")
    subprocess.run(["rm", "-rf", work], check=True)
    subprocess.run(["cp", "-a", data_dir, work], check=True)
    log("run: %s" % system)
    server = Server(args.maitre, work, os.path.join(out, "server.log"),
                    ["--allocator", system])
    benches = []
    try:
        # The SLO is each app's default latency objective: what the plan is
        # made for (the queries also state it).
        for app in APPS:
            http("PUT", server.url + "/v2/apps/" + app, {"latency_ms": SLO_MS})
        # The first plan needs some demand to plan for: a query per app
        # until each is served.
        for app, (sub, _) in APPS.items():
            sample = os.path.join(args.zoo, sub, "valset.npz")

            def served(app=app, sample=sample):
                r = subprocess.run(
                    [args.maitre, "bench", "--server", server.url, "--app", app,
                     "--rate", "20", "--duration", "1", "--input", sample,
                     "--batch", str(ROWS_PER_QUERY), "--latency-ms", str(SLO_MS),
                     "--protocol", "http-binary", "--json"],
                    capture_output=True, text=True)
                return r.returncode == 0 and json.loads(r.stdout)["requests"]["ok"] > 0
            wait_for("the first plan of " + app, served, 300, 1, server.alive)
        # A warm-up at the base load, not measured: the plan in force when
        # the trace starts is then made for the trace's first demand.
        warm = [subprocess.Popen(
            [args.maitre, "bench", "--server", server.url, "--app", app,
             "--rate", "%.1f" % (shape["base"] * capacity[app]),
             "--duration", str(WARMUP_S),
             "--input", os.path.join(args.zoo, sub, "valset.npz"),
             "--batch", str(ROWS_PER_QUERY), "--latency-ms", str(SLO_MS),
             "--protocol", "http-binary", "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for app, (sub, shape) in APPS.items()]
        for proc in warm:
            proc.wait()
        for app, (sub, shape) in APPS.items():
            trace = os.path.join(out, app + "-trace.csv")
            write_trace(trace, shape, capacity[app], SEED + len(benches))
            report = open(os.path.join(out, app + "-bench.json"), "w")
            benches.append((report, subprocess.Popen(
                [args.maitre, "bench", "--server", server.url, "--app", app,
                 "--rate", "1", "--arrivals", "trace:" + trace,
                 "--duration", str(DURATION_S),
                 "--input", os.path.join(args.zoo, sub, "valset.npz"),
                 "--batch", str(ROWS_PER_QUERY), "--latency-ms", str(SLO_MS),
                 "--protocol", "http-binary", "--timeout", "10",
                 "--series", os.path.join(out, app + "-series.csv"), "--json"],
                stdout=report, stderr=subprocess.DEVNULL)))
        for report, proc in benches:
            if proc.wait() != 0:
                raise SystemExit("drive: maitre bench failed; see %s" % report.name)
            report.close()
        server.alive()
    finally:
        for _, proc in benches:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        server.stop()
        subprocess.run(["rm", "-rf", work])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--maitre", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--systems", default="proteus,clipper-ha,clipper-ht,infaas-accuracy")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    data_dir = os.path.join(args.out, "registry")
    setup(args, data_dir)
    # Capacities from the profiles, read once through a server on the
    # profiled registry, so every system sees the same load.
    server = Server(args.maitre, data_dir, os.path.join(args.out, "capacity.log"),
                    ["--model-autoscaler", "off"])
    try:
        capacity = {app: full_accuracy_capacity(server, app) for app in APPS}
        best = {app: max(v["accuracy"] for m in server.get("/v2/apps/" + app)["models"]
                         for v in m["variants"]) for app in APPS}
    finally:
        server.stop()
    with open(os.path.join(args.out, "setup.json"), "w") as f:
        json.dump({"rows_per_query": ROWS_PER_QUERY, "slo_ms": SLO_MS, "workers": WORKERS,
                   "duration_s": DURATION_S, "full_accuracy_capacity_qps": capacity,
                   "best_accuracy": best,
                   "shapes": {a: s for a, (_, s) in APPS.items()}}, f, indent=2)
    log("full-accuracy capacity (queries of %d rows/s): %s"
        % (ROWS_PER_QUERY, ", ".join("%s %.0f" % kv for kv in capacity.items())))
    for system in args.systems.split(","):
        run_system(args, system, data_dir, capacity)


if __name__ == "__main__":
    main()
