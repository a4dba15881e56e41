// Run() latency of every zoo model on both runtimes (and torch with
// optimize_for_inference, the torch-opt variant), at batch 1, 8, 16 and 32, and
// alternating between the two (what a worker's batcher produces, and what
// makes OpenCV reallocate its net on each shape change).
//
//   ninja -C build executor_bench
//   OPENBLAS_NUM_THREADS=1 build/src/runtime/executor_bench --zoo=.zoo [--threads=1]
//       [--benchmark_filter=mlp] [--benchmark_repetitions=5]
//
// The zoo directory comes from --zoo, else MAITRE_ZOO_DIR, else ./.zoo.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "runtime/executor.h"
#include "runtime/testing/zoo.h"
#include "core/valset.h"

namespace maitre::runtime {
namespace {

// Real images when the valset is there; the executors do not care, but
// denormals and zeros could flatter some kernels.
std::vector<Tensor> Inputs(int64_t batch) {
  absl::StatusOr<const Valset*> valset = testing::ZooValset();
  if (valset.ok()) {
    absl::StatusOr<Tensor> rows = SliceRows((*valset)->inputs, 0, batch);
    if (rows.ok()) return {*rows};
  }
  Tensor t{"input", DataType::kFp32, {batch, 1, 28, 28}, std::string()};
  t.data.assign(static_cast<size_t>(batch) * 28 * 28 * sizeof(float), '\0');
  return {t};
}

// How a benchmark runs a model: a runtime, and for torch whether the module
// is optimised at load time (the torch-opt variant).
struct Flavor {
  const char* name;
  Runtime runtime;
  bool optimize;
};
constexpr Flavor kFlavors[] = {{"torch", Runtime::kTorch, false},
                               {"torch-opt", Runtime::kTorch, true},
                               {"opencv", Runtime::kOpenCv, false}};

void RunExecutor(benchmark::State& state, Flavor flavor, std::string path,
                 std::vector<int64_t> batches) {
  ExecutorOptions options;
  options.runtime = flavor.runtime;
  options.optimize_for_inference = flavor.optimize;
  options.model_path = path;
  options.spec = testing::FmnistSpec();
  absl::StatusOr<std::unique_ptr<Executor>> executor = CreateExecutor(options);
  if (!executor.ok()) {
    state.SkipWithError(std::string(executor.status().message()).c_str());
    return;
  }
  std::vector<std::vector<Tensor>> inputs;
  for (int64_t b : batches) inputs.push_back(Inputs(b));
  int64_t rows = 0;
  size_t i = 0;
  for (auto _ : state) {
    const std::vector<Tensor>& in = inputs[i];
    absl::StatusOr<std::vector<Tensor>> out = (*executor)->Run(in);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(out->front().data.data());
    rows += in[0].shape[0];
    i = (i + 1) % inputs.size();
  }
  state.SetItemsProcessed(rows);
}

int Main(int argc, char** argv) {
  int threads = 1;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--zoo=", 6) == 0) {
      setenv("MAITRE_ZOO_DIR", argv[i] + 6, 1);
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      threads = std::atoi(argv[i] + 10);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (std::getenv("MAITRE_ZOO_DIR") == nullptr) setenv("MAITRE_ZOO_DIR", ".zoo", 1);
  ConfigureProcessThreads(threads);

  absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo();
  if (!zoo.ok()) {
    std::cerr << "executor_bench: " << zoo.status().message() << "\n";
    return 1;
  }
  for (const testing::ZooModel& model : *zoo) {
    for (const Flavor& flavor : kFlavors) {
      const std::string& path =
          flavor.runtime == Runtime::kTorch ? model.torchscript : model.onnx;
      for (std::vector<int64_t> batches :
           {std::vector<int64_t>{1}, std::vector<int64_t>{8}, std::vector<int64_t>{16},
            std::vector<int64_t>{32}, std::vector<int64_t>{1, 8}}) {
        std::string name = absl::StrCat(model.name, "/", flavor.name, "/",
                                        batches.size() == 1 ? "batch" : "alternate");
        for (int64_t b : batches) absl::StrAppend(&name, ":", b);
        benchmark::RegisterBenchmark(name.c_str(), RunExecutor, flavor, path, batches)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.5);
      }
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace maitre::runtime

int main(int argc, char** argv) { return maitre::runtime::Main(argc, argv); }
