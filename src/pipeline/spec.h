// A pipeline: a DAG over registered models, the unit InferLine provisions
// against one end-to-end latency objective (docs/pipelines.md, "The spec";
// Crankshaw et al., InferLine, SoCC '20, §3). This file holds the spec's
// value types, its JSON form and the checks a registration runs; the
// serving half and the planner both start from a ValidatedPipeline.
//
// The JSON form (docs/pipelines.md has the full grammar):
//   {"name": "cascade",
//    "vertices": [
//      {"name": "fast", "model": "fmnist-logreg", "inputs": {"input": "$image"}},
//      {"name": "slow", "model": "fmnist-cnn-wide", "inputs": {"input": "$image"}}],
//    "edges": [{"from": "fast", "to": "slow",
//               "when": {"output": "logits", "max_softmax_below": 0.8}}],
//    "outputs": {"logits": ["slow.logits", "fast.logits"]}}
// A vertex input is bound to a pipeline input ("$image") or to another
// vertex's output ("fast.logits", optionally {"from": "fast.logits",
// "transform": "softmax"}). A binding implies an edge; explicit edges add
// ordering and conditions. A vertex runs when every vertex before it ran and
// every condition on its incoming edges holds. A pipeline output names
// candidate sources in order; the first whose vertex ran answers.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model_spec.h"

namespace maitre::pipeline {

// Built-in transforms applied to a vertex output on its way to an input.
enum class Transform { kIdentity, kSoftmax, kArgmax };
absl::string_view TransformName(Transform t);  // "identity" | "softmax" | "argmax"

// A condition on one output of the edge's source vertex, evaluated per row
// on the scores of a [batch, classes] floating-point tensor.
struct Predicate {
  enum class Kind {
    kMaxSoftmaxBelow,    // max softmax probability < threshold: "unsure"
    kMaxSoftmaxAtLeast,  // max softmax probability >= threshold: "sure"
    kArgmaxIn,           // the top class is one of `classes`
  };
  std::string output;
  Kind kind = Kind::kMaxSoftmaxBelow;
  double threshold = 0;
  std::vector<int64_t> classes;
};

// Where a vertex input comes from.
struct Source {
  // Empty for a pipeline input; otherwise the producing vertex.
  std::string vertex;
  // The pipeline input's or the vertex output's name.
  std::string tensor;
  Transform transform = Transform::kIdentity;
};

struct Vertex {
  std::string name;
  std::string model;
  std::map<std::string, Source> inputs;  // model input name -> source
};

struct Edge {
  std::string from;
  std::string to;
  std::optional<Predicate> when;
};

struct PipelineSpec {
  std::string name;
  std::vector<Vertex> vertices;
  std::vector<Edge> edges;  // explicit ones, as written
  // Pipeline output name -> candidate sources, first that ran wins.
  std::map<std::string, std::vector<Source>> outputs;
};

// The spec after the checks: every edge (bindings' and explicit ones, one
// per ordered pair, conditions merged), the vertices in a topological order,
// and the pipeline inputs with the types the models they feed expect.
struct ValidatedPipeline {
  PipelineSpec spec;
  std::vector<Edge> edges;
  std::vector<int32_t> order;  // indices into spec.vertices
  std::vector<TensorSpec> inputs;
  std::map<std::string, TensorSpec> outputs;

  int32_t VertexIndex(absl::string_view name) const;  // -1 if none
};

// Parses the JSON form. Errors name the field (and vertex) at fault.
absl::StatusOr<PipelineSpec> ParsePipelineSpecJson(absl::string_view json);

// The registration checks, against the registered models by name:
// unique vertex names, known models, every model input bound exactly once
// to a source that exists, matching dtypes and shapes across each binding
// (after its transform), conditions on outputs the source vertex has (and
// of a type the predicate reads), no cycle, outputs that exist. Every error
// is InvalidArgument and names the vertex (or edge, or output) at fault.
absl::StatusOr<ValidatedPipeline> ValidatePipeline(
    PipelineSpec spec, const std::map<std::string, ModelSpec>& models);

// What `transform` makes of a tensor of spec `in`, or why it cannot apply.
absl::StatusOr<TensorSpec> ApplyTransform(Transform transform, const TensorSpec& in);

}  // namespace maitre::pipeline
