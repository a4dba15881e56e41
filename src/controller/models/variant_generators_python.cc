// The real optimiser steps for the variant pipeline: runtime's Python-backed
// generators. Kept apart so the pipeline's tests need not run Python.
#include "controller/models/variant_pipeline.h"
#include "generator/variant_generator.h"

namespace maitre::controller {

VariantGenerators PythonGenerators(const std::string& work_dir, SandboxMode sandbox,
                                   const std::string& sandbox_user) {
  generator::GeneratorOptions options;
  options.work_dir = work_dir;
  options.sandbox = sandbox;
  options.sandbox_user = sandbox_user;
  VariantGenerators g;
  g.available = [options] { return generator::CheckOptimizerAvailable(options); };
  g.quantize_int8 = [options](absl::string_view model, const ModelSpec& spec) {
    return generator::QuantizeInt8(model, spec, options);
  };
  g.export_onnx = [options](absl::string_view model, const ModelSpec& spec) {
    return generator::ExportOnnx(model, spec, options);
  };
  return g;
}

}  // namespace maitre::controller
