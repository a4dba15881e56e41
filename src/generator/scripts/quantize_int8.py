"""Maitre variant generator: the `torch-int8` step.

Dynamic int8 quantisation of a TorchScript model's Linear layers (weights
stored as int8, activations quantised per call), for the oneDNN engine: the
CPU counterpart of INFaaS's TensorRT step.

usage: quantize_int8.py MODEL.pt SPEC.json OUT.pt

Verifies before it exits 0 that the saved file loads again and, on zeros
shaped from the spec, returns the declared outputs at batch 1 (and 2 when
the batch is dynamic). A model without Linear layers exits
EXIT_NOTHING_TO_DO: an int8 variant would be the float model under another
name.
"""

import sys

import maitre_common as mc


def count_dynamic_linears(module):
    # quantize_dynamic_jit inlines the quantised calls into forward; the
    # inlined graph also sees any that stay inside submodule methods.
    return sum(1 for node in module.inlined_graph.nodes()
               if node.kind() == "quantized::linear_dynamic")


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: quantize_int8.py MODEL.pt SPEC.json OUT.pt")
    model_path, spec_path, out_path = argv
    torch = mc.import_torch()
    # There is no FBGEMM in Debian's torch; oneDNN is the x86 engine that
    # the C++ torch executor also selects (ConfigureProcessThreads).
    if "onednn" not in torch.backends.quantized.supported_engines:
        mc.fail(mc.EXIT_UNAVAILABLE, "torch %s has no oneDNN quantized engine (it has %s)"
                % (torch.__version__, ", ".join(torch.backends.quantized.supported_engines)))
    torch.backends.quantized.engine = "onednn"
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic_jit
    except ImportError as e:
        mc.fail(mc.EXIT_UNAVAILABLE, "torch %s cannot quantise TorchScript dynamically: %s"
                % (torch.__version__, mc.error_reason(e)))

    spec = mc.load_spec(spec_path)
    model = mc.load_torchscript(torch, model_path)
    for batch in mc.check_batches(spec):
        mc.run_and_check(torch, model, spec, batch, "the model", mc.EXIT_BAD_MODEL)

    # Per-channel weight scales are oneDNN's default for linear layers and
    # lose less accuracy than one scale per tensor on the zoo's classifiers.
    try:
        quantized = quantize_dynamic_jit(model, {"": per_channel_dynamic_qconfig})
    except Exception as e:
        mc.fail(mc.EXIT_STEP_FAILED, "dynamic quantisation failed: %s" % mc.error_reason(e))
    layers = count_dynamic_linears(quantized)
    if layers == 0:
        mc.fail(mc.EXIT_NOTHING_TO_DO,
                "nothing to quantise: the model has no Linear layers that dynamic int8 "
                "quantisation can convert")

    try:
        torch.jit.save(quantized, out_path)
        reloaded = torch.jit.load(out_path, map_location="cpu")
    except Exception as e:
        mc.fail(mc.EXIT_STEP_FAILED, "the quantised model does not save and load again: %s"
                % mc.error_reason(e))
    for batch in mc.check_batches(spec):
        mc.run_and_check(torch, reloaded, spec, batch, "the quantised model", mc.EXIT_STEP_FAILED)
    print("quantised %d Linear layer(s) to int8 for the oneDNN engine" % layers)


if __name__ == "__main__":
    mc.run_step(main)
