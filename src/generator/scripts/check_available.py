"""Maitre variant generator: can the optimiser steps run with this python?

usage: check_available.py

Exits 0 and prints the versions when torch imports, has the oneDNN quantized
engine and dynamic TorchScript quantisation, and has the ONNX exporter;
otherwise exits EXIT_UNAVAILABLE naming what is missing.
"""

import sys

import maitre_common as mc


def main(argv):
    torch = mc.import_torch()
    engines = torch.backends.quantized.supported_engines
    if "onednn" not in engines:
        mc.fail(mc.EXIT_UNAVAILABLE, "torch %s has no oneDNN quantized engine (it has %s)"
                % (torch.__version__, ", ".join(engines)))
    try:
        from torch.ao.quantization import quantize_dynamic_jit  # noqa: F401
        import torch.onnx  # noqa: F401
    except ImportError as e:
        mc.fail(mc.EXIT_UNAVAILABLE, "torch %s lacks a generator step: %s"
                % (torch.__version__, mc.error_reason(e)))
    print("python %s, torch %s, quantized engines %s"
          % (sys.version.split()[0], torch.__version__, ", ".join(engines)))


if __name__ == "__main__":
    mc.run_step(main)
