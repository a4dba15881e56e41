"""Helpers shared by Maitre's variant-generator steps.

These scripts are embedded into the maitre binary (src/runtime/CMakeLists.txt
turns them into a header) and written into a private scratch directory for
each step, so this module is imported from beside the step script.

Contract with src/generator/variant_generator.cc: a step exits 0 after writing
its output file, or prints one line "maitre-generator: error: ..." on stderr
and exits with one of the codes below, which the C++ side maps to a status.
Any other failure (an uncaught exception: exit 1) is an internal error.
"""

import json
import sys
import warnings

EXIT_BAD_MODEL = 3     # the input is not a usable model for its spec: InvalidArgument
EXIT_NOTHING_TO_DO = 4  # the step does not apply to this model: FailedPrecondition
EXIT_UNAVAILABLE = 5   # the optimiser is missing on this machine: FailedPrecondition
EXIT_STEP_FAILED = 6   # the optimiser ran but its result is unusable: Internal

# Open Inference Protocol datatype names (core/tensor.h) to torch dtype names.
# UINT16/32/64 have no torch counterpart in torch 1.13.
TORCH_DTYPES = {
    "BOOL": "bool", "UINT8": "uint8", "INT8": "int8", "INT16": "int16",
    "INT32": "int32", "INT64": "int64", "FP16": "float16", "FP32": "float32",
    "FP64": "float64",
}


class StepError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def fail(code, message):
    raise StepError(code, message)


def error_reason(error):
    """One line of an exception's text that says what went wrong: torch's
    messages run on for pages (C++ stack traces). That is the first line,
    except for the TorchScript interpreter's, which ends with the error the
    failing operation raised."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        return lines[-1]
    return lines[0]


def run_step(main):
    """Runs main(argv) and turns a StepError into the exit-code contract."""
    # torch warns about deprecated internals it calls itself (.grad of
    # non-leaf tensors, missing ScriptMethod signatures); none of them is
    # actionable by the person registering a model, and they would bury the
    # error line that the C++ side reports.
    warnings.simplefilter("ignore")
    try:
        main(sys.argv[1:])
    except StepError as e:
        sys.stderr.write("maitre-generator: error: %s\n" % e.message)
        sys.stderr.flush()
        sys.exit(e.code)


def import_torch():
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install raising anything
        fail(EXIT_UNAVAILABLE, "cannot import torch with %s: %s" % (sys.executable, error_reason(e)))
    # The controller's workers share this small machine: one thread is plenty
    # for a one-off conversion of a model.
    torch.set_num_threads(1)
    return torch


def load_spec(path):
    with open(path) as f:
        spec = json.load(f)
    for t in spec["inputs"] + spec["outputs"]:
        if t["datatype"] not in TORCH_DTYPES:
            fail(EXIT_BAD_MODEL, "tensor '%s' has datatype %s, which torch cannot hold"
                 % (t["name"], t["datatype"]))
    return spec


def example_inputs(torch, spec, batch):
    """Zeros shaped from the spec: the batch dimension (-1) is `batch`, any
    other -1 dimension is 1."""
    tensors = []
    for t in spec["inputs"]:
        shape = [d if d >= 0 else (batch if i == 0 else 1) for i, d in enumerate(t["shape"])]
        tensors.append(torch.zeros(shape, dtype=getattr(torch, TORCH_DTYPES[t["datatype"]])))
    return tuple(tensors)


def load_torchscript(torch, path):
    try:
        model = torch.jit.load(path, map_location="cpu")
    except Exception as e:
        fail(EXIT_BAD_MODEL, "not a TorchScript model file: %s" % error_reason(e))
    model.eval()
    return model


def as_output_list(result):
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def run_and_check(torch, model, spec, batch, what, code):
    """Runs `model` on zeros at `batch` and checks the outputs against the
    spec's count and shapes (dtypes are converted by the executors, as in
    CreateExecutor). Failures exit with `code`, naming `what` was run."""
    inputs = example_inputs(torch, spec, batch)
    try:
        with torch.no_grad():
            outputs = as_output_list(model(*inputs))
    except Exception as e:
        fail(code, "%s fails on zeros shaped like the declared inputs (batch %d): %s"
             % (what, batch, error_reason(e)))
    if len(outputs) != len(spec["outputs"]):
        fail(code, "%s returns %d output(s), the spec declares %d"
             % (what, len(outputs), len(spec["outputs"])))
    for out, declared in zip(outputs, spec["outputs"]):
        if not isinstance(out, torch.Tensor):
            fail(code, "%s returns a %s for output '%s', not a tensor"
                 % (what, type(out).__name__, declared["name"]))
        want = [batch if (i == 0 and d < 0) else d for i, d in enumerate(declared["shape"])]
        got = list(out.shape)
        if len(got) != len(want) or any(w >= 0 and g != w for g, w in zip(got, want)):
            fail(code, "%s returns shape %s for output '%s' at batch %d; the spec declares %s"
                 % (what, got, declared["name"], batch, declared["shape"]))
        if out.is_floating_point() and not bool(torch.isfinite(out).all()):
            fail(code, "%s returns non-finite values for output '%s' on zeros"
                 % (what, declared["name"]))
    return outputs


def check_batches(spec):
    """Batch sizes to verify a result at: 1, and 2 when the batch dimension
    is dynamic, so a result that fixed its batch to the example's is caught."""
    dynamic = all(t["shape"] and t["shape"][0] < 0 for t in spec["inputs"])
    return [1, 2] if dynamic else [1]
