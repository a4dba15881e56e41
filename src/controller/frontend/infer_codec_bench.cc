// Cost of decoding an Open Inference Protocol request body in the HTTP
// front-end (ParseInferRequest), the costliest step of its work per query:
// one Fashion-MNIST row (784 FP32 values) and eight, as JSON and as the
// binary-data extension.
//
//   infer_codec_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "controller/frontend/infer_codec.h"

namespace maitre::controller {
namespace {

constexpr int kRowValues = 784;

// Pixel intensities in [0, 1] to six significant digits, a quarter of them
// 0, as in Fashion-MNIST.
std::string JsonBody(int rows) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::string data;
  for (int i = 0; i < rows * kRowValues; ++i) {
    const float v = rng() % 4 == 0 ? 0.0f : pixel(rng);
    absl::StrAppend(&data, i == 0 ? "" : ",", v);
  }
  return absl::StrCat(R"({"inputs":[{"name":"image","shape":[)", rows, ",1,28,28",
                      R"(],"datatype":"FP32","data":[)", data, "]}]}");
}

void BM_ParseJson(benchmark::State& state) {
  const std::string body = JsonBody(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto request = ParseInferRequest(body, -1);
    if (!request.ok()) state.SkipWithError(std::string(request.status().message()).c_str());
    benchmark::DoNotOptimize(request);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["rows"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_ParseJson)->Arg(1)->Arg(8);

void BM_ParseBinary(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const std::string header = absl::StrCat(
      R"({"inputs":[{"name":"image","shape":[)", rows, ",1,28,28",
      R"(],"datatype":"FP32","parameters":{"binary_data_size":)", rows * kRowValues * 4,
      "}}]}");
  std::string body = header;
  body.append(static_cast<size_t>(rows * kRowValues * 4), '\0');
  for (auto _ : state) {
    auto request = ParseInferRequest(body, static_cast<int64_t>(header.size()));
    if (!request.ok()) state.SkipWithError(std::string(request.status().message()).c_str());
    benchmark::DoNotOptimize(request);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_ParseBinary)->Arg(1)->Arg(8);

}  // namespace
}  // namespace maitre::controller

BENCHMARK_MAIN();
