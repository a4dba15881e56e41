"""Maitre variant generator: the `torch-int8` step.

Dynamic int8 quantisation of a TorchScript model's Linear layers (weights
stored as int8, activations quantised per call, with a scale of their own for
every row), for the oneDNN engine: the CPU counterpart of INFaaS's TensorRT
step.

usage: quantize_int8.py MODEL.pt SPEC.json OUT.pt

Verifies before it exits 0 that the saved file loads again and, on zeros
shaped from the spec, returns the declared outputs at batch 1 (and 2 when
the batch is dynamic), and that a row's answer does not change when rows of
+-1e30 share its batch. A model without Linear layers exits
EXIT_NOTHING_TO_DO: an int8 variant would be the float model under another
name.
"""

import sys

import maitre_common as mc


# quantize_dynamic_jit's layers quantise their input with one scale for the
# whole tensor, taken from its minimum and maximum: every row of a batch
# shares it, so one row of 1e30 turned its neighbours' activations to zeros
# and changed their answers, and a NaN row failed the whole batch
# (docs/architecture.md, "A row's answer never depends on its batch"). Each
# layer is rewritten so that every row is quantised on its own scale within
# one call of the same int8 kernel:
#   - the input is seen as rows of its last dimension (a [batch, ..., K]
#     activation becomes [-1, K]: whatever a model's layout, no row mixes
#     two queries); NaN becomes 0 and +-Inf +-FLT_MAX, or the quantiser
#     fails on the whole tensor;
#   - each row is divided by its largest magnitude (at least FLT_MIN), so
#     its values lie in [-1, 1] and its largest is exactly +-1;
#   - three sentinel rows, all 1, all -1 and all 0, go below them: the
#     tensor's minimum and maximum are then exactly -1 and 1 whatever the
#     other rows hold, so the kernel's scale and zero point are the same for
#     every batch;
#   - the zero row's output is the layer's bias b (its quantised values are
#     the zero point, so the integer products cancel exactly); a row's output
#     y' = W x/s + b becomes W x + b = s (y' - b) + b.
# The kernel's cost is mostly per call (~40 us on the zoo), so this costs a
# dozen small tensor operations per layer (~20-40 us), not a call per row.
PER_TENSOR_LAYER = """
graph(%input, %packed, %reduce_range):
  %out = quantized::linear_dynamic(%input, %packed, %reduce_range)
  return (%out)"""

PER_ROW_LAYER = """
graph(%input, %packed, %reduce_range):
  %none : NoneType = prim::Constant()
  %keep_dim : bool = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %last : int = prim::Constant[value=-1]()
  %flt_min : float = prim::Constant[value=1.1754943508222875e-38]()
  %width : int = aten::size(%input, %last)
  %rows_shape : int[] = prim::ListConstruct(%last, %width)
  %rows : Tensor = aten::reshape(%input, %rows_shape)
  %row_count : int = aten::size(%rows, %zero)
  %finite : Tensor = aten::nan_to_num(%rows, %none, %none, %none)
  %magnitude : Tensor = aten::abs(%finite)
  %row_dim : int[] = prim::ListConstruct(%one)
  %peak : Tensor = aten::amax(%magnitude, %row_dim, %keep_dim)
  %scale : Tensor = aten::clamp_min(%peak, %flt_min)
  %unit_rows : Tensor = aten::div(%finite, %scale)
  %sentinel_shape : int[] = prim::ListConstruct(%one, %width)
  %ones : Tensor = aten::new_ones(%rows, %sentinel_shape, %none, %none, %none, %none)
  %minus_ones : Tensor = aten::neg(%ones)
  %zeros : Tensor = aten::new_zeros(%rows, %sentinel_shape, %none, %none, %none, %none)
  %parts : Tensor[] = prim::ListConstruct(%unit_rows, %ones, %minus_ones, %zeros)
  %stacked : Tensor = aten::cat(%parts, %zero)
  %stacked_out : Tensor = quantized::linear_dynamic(%stacked, %packed, %reduce_range)
  %unit_out : Tensor = aten::slice(%stacked_out, %zero, %zero, %row_count, %one)
  %bias : Tensor = aten::slice(%stacked_out, %zero, %last, %none, %one)
  %centred : Tensor = aten::sub(%unit_out, %bias, %one)
  %scaled : Tensor = aten::mul(%centred, %scale)
  %rows_out : Tensor = aten::add(%scaled, %bias, %one)
  %input_shape : int[] = aten::size(%input)
  %lead_shape : int[] = aten::slice(%input_shape, %zero, %last, %one)
  %out_width : int = aten::size(%stacked_out, %last)
  %out_tail : int[] = prim::ListConstruct(%out_width)
  %out_shape : int[] = aten::add(%lead_shape, %out_tail)
  %out : Tensor = aten::reshape(%rows_out, %out_shape)
  return (%out)"""


def dynamic_linears(module):
    # quantize_dynamic_jit inlines the quantised calls into forward; the
    # inlined graph also sees any that stay inside submodule methods.
    return [node for node in module.inlined_graph.nodes()
            if node.kind() == "quantized::linear_dynamic"]


def quantise_rows_apart(torch, module):
    """Rewrites every quantised layer of `module` in place to PER_ROW_LAYER
    and returns how many of its layers now read their input that way."""
    # The rewriter finds every match before it replaces any, so the kernel
    # call inside the replacement is not matched again.
    for sub in module.modules():
        for name in sub._c._method_names():
            torch._C._jit_pass_custom_pattern_based_rewrite_graph(
                PER_TENSOR_LAYER, PER_ROW_LAYER, sub._c._get_method(name).graph)
    # A layer reads the sentinel-stacked rows exactly when its input is the
    # rewrite's aten::cat.
    return sum(1 for node in dynamic_linears(module)
               if node.inputsAt(0).node().kind() == "aten::cat")


def check_rows_apart(torch, model, spec):
    """Fails unless a row gives the same outputs alone and beside rows of
    +-1e30, when the batch is dynamic and every input is floating point
    (an integer input, such as token ids, has no extreme value that every
    model accepts)."""
    if mc.check_batches(spec) == [1] or not all(
            getattr(torch, mc.TORCH_DTYPES[t["datatype"]]).is_floating_point
            for t in spec["inputs"]):
        return
    generator = torch.Generator().manual_seed(0)
    row = [torch.rand(x.shape, generator=generator, dtype=x.dtype) * 2 - 1
           for x in mc.example_inputs(torch, spec, 1)]
    batch = [torch.cat([x, torch.full_like(x, 1e30), torch.full_like(x, -1e30)]) for x in row]
    with torch.no_grad():
        alone = mc.as_output_list(model(*row))
        together = mc.as_output_list(model(*batch))
    for a, t, declared in zip(alone, together, spec["outputs"]):
        if not a.is_floating_point():
            continue
        # Not exact: float layers before a quantised one may sum in another
        # order at another batch size, and a value on a rounding boundary
        # then moves the row by one quantisation step (~1e-3 on the zoo).
        # Sharing a scale with rows of 1e30 moved it by whole units.
        if not torch.allclose(t[:1], a, rtol=1e-2, atol=1e-2):
            mc.fail(mc.EXIT_STEP_FAILED,
                    "the quantised model's output '%s' for a row changes when rows of +-1e30 "
                    "share its batch (by up to %g)"
                    % (declared["name"], float((t[:1] - a).abs().max())))


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
    layers = len(dynamic_linears(quantized))
    if layers == 0:
        mc.fail(mc.EXIT_NOTHING_TO_DO,
                "nothing to quantise: the model has no Linear layers that dynamic int8 "
                "quantisation can convert")
    try:
        apart = quantise_rows_apart(torch, quantized)
    except Exception as e:
        mc.fail(mc.EXIT_STEP_FAILED, "rewriting the layers to quantise each row apart failed: %s"
                % mc.error_reason(e))
    if apart != layers:
        mc.fail(mc.EXIT_STEP_FAILED, "only %d of %d quantised layers could be rewritten to "
                "quantise each row apart; batched rows would change each other's answers"
                % (apart, layers))

    try:
        torch.jit.save(quantized, out_path)
        reloaded = torch.jit.load(out_path, map_location="cpu")
    except Exception as e:
        mc.fail(mc.EXIT_STEP_FAILED, "the quantised model does not save and load again: %s"
                % mc.error_reason(e))
    for batch in mc.check_batches(spec):
        mc.run_and_check(torch, reloaded, spec, batch, "the quantised model", mc.EXIT_STEP_FAILED)
    check_rows_apart(torch, reloaded, spec)
    print("quantised %d Linear layer(s) to int8 for the oneDNN engine, each row on its own scale"
          % layers)


if __name__ == "__main__":
    mc.run_step(main)
