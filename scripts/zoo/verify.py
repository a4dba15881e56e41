#!/usr/bin/python3
"""Checks a zoo written by scripts/build-zoo.

    /usr/bin/python3 scripts/zoo/verify.py DIR [--full] [--latency]

DIR is a zoo directory: the top-level one, or its coarse/ subdirectory (the
4-class task; its width comes from meta.json).

For every model in DIR/zoo.json:
  * the TorchScript file loads with torch.jit.load in a fresh process;
  * the ONNX file passes onnx.checker and, when python3-opencv is installed,
    loads with cv2.dnn.readNetFromONNX and matches the TorchScript output
    within 1e-3 at batch 1 and batch 7 (neither is the export batch);
  * with --full, the TorchScript model's top-1 accuracy on valset.npz
    equals the zoo.json value (and OpenCV's, when available, is within 0.1
    points of it);
  * with --latency, prints the median TorchScript batch-1 latency on CPU.
It also checks the layout of valset.npz, meta.json and, where there is
one, samples/.
OpenCV is only a verification aid: nothing in the zoo needs it.
"""

import argparse
import json
import os
import subprocess
import sys
import time

TOL = 1e-3


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def fresh_process_load(path, classes):
    code = ("import sys, torch\n"
            "m = torch.jit.load(sys.argv[1])\n"
            "y = m(torch.rand(3, 1, 28, 28))\n"
            "assert tuple(y.shape) == (3, int(sys.argv[2])), y.shape\n")
    r = subprocess.run(["/usr/bin/python3", "-c", code, path, str(classes)],
                       capture_output=True, text=True)
    check(r.returncode == 0, "%s: fresh torch.jit.load failed:\n%s"
          % (path, r.stderr[-2000:]))


def check_samples(d, x, y):
    import numpy as np
    with open(os.path.join(d, "samples", "request.json")) as f:
        req = json.load(f)["inputs"][0]
    check(req["name"] == "input" and req["shape"] == [1, 1, 28, 28]
          and req["datatype"] == "FP32" and len(req["data"]) == 784,
          "samples/request.json layout")
    check(np.allclose(np.array(req["data"], np.float32), x[0].reshape(-1)),
          "request.json data is not the first test image")
    with open(os.path.join(d, "samples", "label.txt")) as f:
        check(int(f.read()) == int(y[0]), "samples/label.txt")
    b8 = np.load(os.path.join(d, "samples", "batch8.npz"))
    check(np.array_equal(b8["inputs"], x[:8])
          and np.array_equal(b8["labels"], y[:8]), "samples/batch8.npz")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--full", action="store_true",
                    help="recompute accuracy on the whole valset")
    ap.add_argument("--latency", action="store_true",
                    help="measure TorchScript batch-1 latency")
    args = ap.parse_args()
    d = args.dir

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import numpy as np
    import onnx
    import torch
    torch.set_num_threads(2)
    try:
        import cv2
    except ImportError:
        cv2 = None
        print("note: cv2 not installed, skipping OpenCV checks")

    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    check(meta["inputs"][0]["name"] == "input"
          and meta["outputs"][0]["name"] == "logits", "meta.json names")
    classes = meta["outputs"][0]["shape"][1]

    val = np.load(os.path.join(d, "valset.npz"))
    x, y = val["inputs"], val["labels"]
    check(x.dtype == np.float32 and x.shape == (10000, 1, 28, 28),
          "valset inputs %s %s" % (x.dtype, x.shape))
    check(y.dtype == np.int64 and y.shape == (10000,), "valset labels")
    check(0.0 <= x.min() and x.max() <= 1.0, "valset range")
    check(0 <= y.min() and y.max() < classes, "valset labels outside [0, %d)"
          % classes)

    if os.path.isdir(os.path.join(d, "samples")):
        check_samples(d, x, y)

    with open(os.path.join(d, "zoo.json")) as f:
        zoo = json.load(f)
    rng = np.random.RandomState(0)
    probe = {1: x[:1], 7: x[rng.choice(len(x), 7, replace=False)]}
    for e in zoo:
        name = e["name"]
        pt = os.path.join(d, e["torchscript"])
        ox = os.path.join(d, e["onnx"])
        fresh_process_load(pt, classes)
        m = torch.jit.load(pt).eval()
        model = onnx.load(ox)
        onnx.checker.check_model(model)
        opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        ops = sorted({n.op_type for n in model.graph.node})
        line = "%-16s opset %d ops %s" % (name, opset, ",".join(ops))
        if cv2 is not None:
            net = cv2.dnn.readNetFromONNX(ox)
            for bs, xb in probe.items():
                with torch.no_grad():
                    ref = m(torch.from_numpy(np.ascontiguousarray(xb))).numpy()
                net.setInput(np.ascontiguousarray(xb), "input")
                got = net.forward()
                check(got.shape == ref.shape, "%s: cv2 shape %s at batch %d"
                      % (name, got.shape, bs))
                diff = float(np.abs(got - ref).max())
                check(diff < TOL, "%s: cv2 differs by %g at batch %d"
                      % (name, diff, bs))
                line += "  cv2 b%d maxdiff %.1e" % (bs, diff)
        print(line, flush=True)
        if args.full:
            with torch.no_grad():
                pred = torch.cat([m(torch.from_numpy(x[i:i + 1000])).argmax(1)
                                  for i in range(0, len(x), 1000)]).numpy()
            acc = float((pred == y).mean())
            check(abs(acc - e["accuracy"]) < 1e-9,
                  "%s: accuracy %.4f but zoo.json says %.4f"
                  % (name, acc, e["accuracy"]))
            msg = "  torch accuracy %.4f" % acc
            if cv2 is not None:
                preds = []
                for i in range(0, len(x), 1000):
                    net.setInput(np.ascontiguousarray(x[i:i + 1000]), "input")
                    preds.append(net.forward().argmax(1))
                cacc = float((np.concatenate(preds) == y).mean())
                check(abs(cacc - acc) <= 0.001,
                      "%s: cv2 accuracy %.4f vs torch %.4f" % (name, cacc, acc))
                msg += "  cv2 accuracy %.4f" % cacc
            print(msg, flush=True)
        if args.latency:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                x1 = torch.from_numpy(x[:1])
                with torch.no_grad():
                    for _ in range(20):
                        m(x1)
                    times = []
                    for _ in range(300):
                        t0 = time.perf_counter()
                        m(x1)
                        times.append(time.perf_counter() - t0)
                print("  torch batch-1 latency, %d thread(s): median %.3f ms"
                      % (threads, 1000 * float(np.median(times))), flush=True)
            torch.set_num_threads(2)
    print("OK: %d models verified in %s" % (len(zoo), d))


if __name__ == "__main__":
    main()
