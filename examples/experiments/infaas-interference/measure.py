#!/usr/bin/env python3
"""Fits the simulator's interference model (sim/simulator.h, InterferenceModel)
to the zoo on this host.

A batch of the zoo's wide CNN (torch-opt, batch 8) is timed by executor_bench
on one core in three cases, each repeated and summarised by its median:
  alone    nothing else runs on the host's cores;
  beside   another executor_bench loops the zoo CNN on the other core: every
           core of a 2-core worker busy (u = 1);
  shared   the same co-runner on the same core: two batches on one core (u = 2).
slowdown_at_full = beside / alone, and oversubscribed_penalty = shared /
(2 * beside): what two batches on one core lose beyond taking turns
(context switches, caches flushed by the other). onset cannot be measured
with two cores (the only shares are 0.5 and 1), so it stays at 0.5: no
slowdown while half the cores are idle.

Usage: measure.py EXECUTOR_BENCH ZOO_DIR OUT_JSON
"""
import json
import os
import signal
import statistics
import subprocess
import sys

TARGET = "fmnist-cnn-wide/torch-opt/batch:8/"
NEIGHBOUR = "fmnist-cnn/torch/batch:8/"
REPETITIONS = 7


def cores():
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        sys.exit("measure.py: needs two cores")
    return allowed[-1], allowed[-2]


def time_target(bench, zoo, core):
    out = subprocess.run(
        ["taskset", "-c", str(core), bench, f"--zoo={zoo}", f"--benchmark_filter={TARGET}",
         f"--benchmark_repetitions={REPETITIONS}", "--benchmark_format=json"],
        check=True, capture_output=True, text=True,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1")).stdout
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    runs = [b["real_time"] * scale[b["time_unit"]] for b in json.loads(out)["benchmarks"]
            if b.get("run_type") == "iteration"]
    return statistics.median(runs)  # microseconds


def with_neighbour(bench, zoo, core, target_core):
    # The neighbour loops until killed, on `core`.
    loop = (f"while :; do taskset -c {core} {bench} --zoo={zoo} "
            f"--benchmark_filter={NEIGHBOUR} >/dev/null 2>&1; done")
    neighbour = subprocess.Popen(["bash", "-c", loop], start_new_session=True,
                                 env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    try:
        return time_target(bench, zoo, target_core)
    finally:
        os.killpg(neighbour.pid, signal.SIGKILL)
        neighbour.wait()


def main():
    bench, zoo, out_path = sys.argv[1:4]
    mine, other = cores()
    alone = time_target(bench, zoo, mine)
    beside = with_neighbour(bench, zoo, other, mine)
    shared = with_neighbour(bench, zoo, mine, mine)
    slowdown = max(1.0, beside / alone)
    penalty = max(1.0, shared / (2 * alone * slowdown))
    result = {
        "target": TARGET.rstrip("/"),
        "neighbour": NEIGHBOUR.rstrip("/"),
        "repetitions": REPETITIONS,
        "median_batch_us": {"alone": round(alone, 1), "beside": round(beside, 1),
                            "shared": round(shared, 1)},
        "fit": {"onset": 0.5, "slowdown_at_full": round(slowdown, 3),
                "oversubscribed_penalty": round(penalty, 3)},
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
