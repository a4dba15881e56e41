"""Maitre variant generator: ONNX export for the `opencv` variant.

Exports a TorchScript model to ONNX (opset 11, the newest OpenCV 4.6 DNN
reads reliably) with every -1 dimension of the spec dynamic, named as in the
spec, so OpenCV's readNetFromONNX takes any batch size.

usage: export_onnx.py MODEL.pt SPEC.json OUT.onnx

When the `onnx` package is importable the result is also checked with
onnx.checker and its input and output names and dynamic dimensions compared
with the spec. Running it through OpenCV is left to the caller (the C++
executor), which is the reader that matters.
"""

import sys

import maitre_common as mc

OPSET = 11


def dynamic_axes(spec):
    axes = {}
    for t in spec["inputs"] + spec["outputs"]:
        dims = {i: ("batch" if i == 0 else "%s_dim%d" % (t["name"], i))
                for i, d in enumerate(t["shape"]) if d < 0}
        if dims:
            axes[t["name"]] = dims
    return axes


def check_onnx_file(path, spec):
    try:
        import onnx
    except ImportError:
        print("python3-onnx is not installed: skipping onnx.checker")
        return
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as e:
        mc.fail(mc.EXIT_STEP_FAILED, "the exported file is not valid ONNX: %s" % mc.error_reason(e))
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    for role, graph_tensors, declared in (("input", graph_inputs, spec["inputs"]),
                                          ("output", model.graph.output, spec["outputs"])):
        names = [t.name for t in graph_tensors]
        if names != [t["name"] for t in declared]:
            mc.fail(mc.EXIT_STEP_FAILED, "the exported %ss are named %s, the spec says %s"
                    % (role, names, [t["name"] for t in declared]))
        for t, want in zip(graph_tensors, declared):
            dims = t.type.tensor_type.shape.dim
            if len(dims) != len(want["shape"]):
                mc.fail(mc.EXIT_STEP_FAILED, "exported %s '%s' has rank %d, the spec says %d"
                        % (role, t.name, len(dims), len(want["shape"])))
            for i, (dim, w) in enumerate(zip(dims, want["shape"])):
                if w < 0 and not dim.dim_param:
                    mc.fail(mc.EXIT_STEP_FAILED, "exported %s '%s' fixed dimension %d to %d; the "
                            "spec declares it dynamic" % (role, t.name, i, dim.dim_value))


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: export_onnx.py MODEL.pt SPEC.json OUT.onnx")
    model_path, spec_path, out_path = argv
    torch = mc.import_torch()
    spec = mc.load_spec(spec_path)
    model = mc.load_torchscript(torch, model_path)
    for batch in mc.check_batches(spec):
        mc.run_and_check(torch, model, spec, batch, "the model", mc.EXIT_BAD_MODEL)

    # The example batch is 2, as in scripts/build-zoo: with a batch of 1 the
    # exporter may fold size-1 dimensions into constants (squeezes, reshapes)
    # even where the axis is declared dynamic.
    example = mc.example_inputs(torch, spec, 2)
    try:
        with torch.no_grad():
            torch.onnx.export(
                model, example, out_path, opset_version=OPSET,
                input_names=[t["name"] for t in spec["inputs"]],
                output_names=[t["name"] for t in spec["outputs"]],
                dynamic_axes=dynamic_axes(spec), do_constant_folding=True)
    except Exception as e:
        mc.fail(mc.EXIT_STEP_FAILED, "torch.onnx.export (opset %d) failed: %s"
                % (OPSET, mc.error_reason(e)))
    check_onnx_file(out_path, spec)
    print("exported ONNX opset %d" % OPSET)


if __name__ == "__main__":
    mc.run_step(main)
