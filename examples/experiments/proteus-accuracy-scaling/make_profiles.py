#!/usr/bin/env python3
"""Writes profile.csv for the proteus-accuracy-scaling experiment.

SYNTHETIC profiles, shaped like the model families of the Proteus paper
(ASPLOS'24, Table 3) on its cluster's three device types (§6.1.5: CPU
workers, GTX 1080 Ti and V100 GPUs). Nothing here is measured.

- Accuracy: each variant's published top-1 (ImageNet) or SST-2 accuracy,
  normalised by its family's most accurate variant, as the paper does
  (§6.1.2); the normalised values span 0.84-1.0.
- Latency: a relative compute cost F per variant (its GFLOPs, or for BERT
  a size-proportional stand-in) turned into a median batch latency per
  device type:
      cpu        p50(b) = 1.0 + 4.00 * F * b             (no gain from batching)
      gtx1080ti  p50(b) = 1.0 + 0.50 * F * (1 + 0.25 (b - 1))
      v100       p50(b) = 0.8 + 0.25 * F * (1 + 0.20 (b - 1))
  in ms, at batches 1, 2, 4, 8 and 16; p99 = 1.1 * p50.
- Load time 1.5 s on a CPU, 3 s on a GPU; memory 1 GB per GPU instance.
"""
import sys

FAMILIES = {
    # family: [(variant, F, accuracy), ...] from least to most accurate
    "resnet": [("18", 1.8, 69.76), ("34", 3.6, 73.31), ("50", 4.1, 76.13),
               ("101", 7.8, 77.37), ("152", 11.5, 78.31)],
    "mobilenet": [("v2-035", 0.06, 60.3), ("v2-050", 0.10, 65.4), ("v2-075", 0.21, 69.8),
                  ("v2-100", 0.30, 71.8)],
    "efficientnet": [("b0", 0.39, 77.1), ("b1", 0.70, 79.1), ("b2", 1.0, 80.1),
                     ("b3", 1.8, 81.6), ("b4", 4.2, 82.9)],
    "bert": [("tiny", 0.3, 83.2), ("mini", 0.8, 85.9), ("small", 2.2, 89.7), ("base", 8.0, 93.5)],
}

def p50(device, f, b):
    if device == "cpu":
        return 1.0 + 4.0 * f * b
    if device == "gtx1080ti":
        return 1.0 + 0.5 * f * (1 + 0.25 * (b - 1))
    return 0.8 + 0.25 * f * (1 + 0.20 * (b - 1))

def main(path):
    with open(path, "w") as out:
        out.write("# SYNTHETIC profiles for proteus-accuracy-scaling; see make_profiles.py.\n")
        out.write("model,variant,worker_type,batch,latency_p50_ms,latency_p99_ms,load_ms,"
                  "memory_mb,accuracy\n")
        for family, variants in FAMILIES.items():
            best = max(a for _, _, a in variants)
            for name, f, acc in variants:
                for device in ("cpu", "gtx1080ti", "v100"):
                    load = 1500 if device == "cpu" else 3000
                    memory = 500 if device == "cpu" else 1024
                    for b in (1, 2, 4, 8, 16):
                        m = p50(device, f, b)
                        out.write(f"{family},{name},{device},{b},{m:.3f},{1.1 * m:.3f},{load},"
                                  f"{memory},{acc / best:.4f}\n")

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "profile.csv")
