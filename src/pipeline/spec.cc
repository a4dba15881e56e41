#include "pipeline/spec.h"

#include <algorithm>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace maitre::pipeline {

using nlohmann::json;

namespace {

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

std::string VertexWhere(absl::string_view name) { return absl::StrCat("vertex \"", name, "\""); }

absl::StatusOr<Transform> ParseTransform(const std::string& name, absl::string_view where) {
  if (name == "identity") return Transform::kIdentity;
  if (name == "softmax") return Transform::kSoftmax;
  if (name == "argmax") return Transform::kArgmax;
  return Bad(where, absl::StrCat("unknown transform \"", name,
                                 "\"; choose identity, softmax or argmax"));
}

// "$name" is a pipeline input; "vertex.output" a vertex's output.
absl::StatusOr<Source> ParseSourceText(const std::string& text, absl::string_view where) {
  Source s;
  if (!text.empty() && text[0] == '$') {
    s.tensor = text.substr(1);
    if (s.tensor.empty()) return Bad(where, "\"$\" needs a pipeline input name");
    return s;
  }
  const size_t dot = text.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == text.size()) {
    return Bad(where, absl::StrCat("source \"", text,
                                   "\" must be \"$input\" or \"vertex.output\""));
  }
  s.vertex = text.substr(0, dot);
  s.tensor = text.substr(dot + 1);
  return s;
}

absl::StatusOr<Source> ParseSource(const json& j, absl::string_view where) {
  if (j.is_string()) return ParseSourceText(j.get<std::string>(), where);
  if (!j.is_object() || !j.contains("from") || !j["from"].is_string()) {
    return Bad(where, "a source is a string or {\"from\": ..., \"transform\": ...}");
  }
  MAITRE_ASSIGN_OR_RETURN(Source s, ParseSourceText(j["from"].get<std::string>(), where));
  if (auto t = j.find("transform"); t != j.end()) {
    if (!t->is_string()) return Bad(where, "\"transform\" must be a string");
    MAITRE_ASSIGN_OR_RETURN(s.transform, ParseTransform(t->get<std::string>(), where));
  }
  return s;
}

absl::StatusOr<Predicate> ParsePredicate(const json& j, absl::string_view where) {
  if (!j.is_object() || !j.contains("output") || !j["output"].is_string()) {
    return Bad(where, "\"when\" needs an \"output\" name");
  }
  Predicate p;
  p.output = j["output"].get<std::string>();
  int kinds = 0;
  for (auto [key, kind] : {std::pair{"max_softmax_below", Predicate::Kind::kMaxSoftmaxBelow},
                           std::pair{"max_softmax_at_least",
                                     Predicate::Kind::kMaxSoftmaxAtLeast}}) {
    auto v = j.find(key);
    if (v == j.end()) continue;
    ++kinds;
    if (!v->is_number() || v->get<double>() < 0 || v->get<double>() > 1) {
      return Bad(where, absl::StrCat("\"", key, "\" must be a probability in [0,1]"));
    }
    p.kind = kind;
    p.threshold = v->get<double>();
  }
  if (auto v = j.find("argmax_in"); v != j.end()) {
    ++kinds;
    if (!v->is_array() || v->empty()) return Bad(where, "\"argmax_in\" must be a class list");
    for (const json& c : *v) {
      if (!c.is_number_integer() || c.get<int64_t>() < 0) {
        return Bad(where, "\"argmax_in\" holds non-negative class indices");
      }
      p.classes.push_back(c.get<int64_t>());
    }
    p.kind = Predicate::Kind::kArgmaxIn;
  }
  if (kinds != 1) {
    return Bad(where, "\"when\" needs exactly one of max_softmax_below, max_softmax_at_least, "
                      "argmax_in");
  }
  return p;
}

bool SameShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != -1 && b[i] != -1 && a[i] != b[i]) return false;
  }
  return true;
}

std::string Describe(const TensorSpec& t) {
  return absl::StrCat(DataTypeName(t.dtype), "[", absl::StrJoin(t.shape, ","), "]");
}

const TensorSpec* FindTensor(const std::vector<TensorSpec>& list, absl::string_view name) {
  for (const TensorSpec& t : list) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The score types conditions and transforms read (pipeline/evaluate.h).
bool IsFloat(DataType t) { return t == DataType::kFp32 || t == DataType::kFp64; }

}  // namespace

absl::string_view TransformName(Transform t) {
  switch (t) {
    case Transform::kIdentity: return "identity";
    case Transform::kSoftmax: return "softmax";
    case Transform::kArgmax: return "argmax";
  }
  return "identity";
}

absl::StatusOr<TensorSpec> ApplyTransform(Transform transform, const TensorSpec& in) {
  if (transform == Transform::kIdentity) return in;
  if (!IsFloat(in.dtype) || in.shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        TransformName(transform), " needs FP32 or FP64 [batch, classes] scores, not ",
        Describe(in)));
  }
  TensorSpec out = in;
  if (transform == Transform::kArgmax) {
    out.dtype = DataType::kInt64;
    out.shape = {in.shape[0]};
  }
  return out;
}

int32_t ValidatedPipeline::VertexIndex(absl::string_view name) const {
  for (size_t i = 0; i < spec.vertices.size(); ++i) {
    if (spec.vertices[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

absl::StatusOr<PipelineSpec> ParsePipelineSpecJson(absl::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("a pipeline spec must be a JSON object");
  }
  PipelineSpec spec;
  if (auto n = j.find("name"); n != j.end()) {
    if (!n->is_string()) return Bad("pipeline", "\"name\" must be a string");
    spec.name = n->get<std::string>();
  }
  auto vertices = j.find("vertices");
  if (vertices == j.end() || !vertices->is_array() || vertices->empty()) {
    return Bad("pipeline", "needs a non-empty \"vertices\" array");
  }
  for (const json& v : *vertices) {
    if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) {
      return Bad("pipeline", "every vertex needs a string \"name\"");
    }
    Vertex vertex;
    vertex.name = v["name"].get<std::string>();
    const std::string where = VertexWhere(vertex.name);
    if (!v.contains("model") || !v["model"].is_string()) return Bad(where, "needs a \"model\"");
    vertex.model = v["model"].get<std::string>();
    if (auto in = v.find("inputs"); in != v.end()) {
      if (!in->is_object()) return Bad(where, "\"inputs\" must map model inputs to sources");
      for (auto it = in->begin(); it != in->end(); ++it) {
        MAITRE_ASSIGN_OR_RETURN(
            Source s, ParseSource(it.value(), absl::StrCat(where, " input \"", it.key(), "\"")));
        vertex.inputs[it.key()] = std::move(s);
      }
    }
    spec.vertices.push_back(std::move(vertex));
  }
  if (auto edges = j.find("edges"); edges != j.end()) {
    if (!edges->is_array()) return Bad("pipeline", "\"edges\" must be an array");
    for (const json& e : *edges) {
      if (!e.is_object() || !e.contains("from") || !e.contains("to") || !e["from"].is_string() ||
          !e["to"].is_string()) {
        return Bad("pipeline", "every edge needs string \"from\" and \"to\"");
      }
      Edge edge{e["from"].get<std::string>(), e["to"].get<std::string>(), std::nullopt};
      if (auto w = e.find("when"); w != e.end()) {
        MAITRE_ASSIGN_OR_RETURN(
            edge.when,
            ParsePredicate(*w, absl::StrCat("edge \"", edge.from, "\" -> \"", edge.to, "\"")));
      }
      spec.edges.push_back(std::move(edge));
    }
  }
  auto outputs = j.find("outputs");
  if (outputs == j.end() || !outputs->is_object() || outputs->empty()) {
    return Bad("pipeline", "needs a non-empty \"outputs\" object");
  }
  for (auto it = outputs->begin(); it != outputs->end(); ++it) {
    const std::string where = absl::StrCat("output \"", it.key(), "\"");
    std::vector<Source> candidates;
    const json list = it.value().is_array() ? it.value() : json::array({it.value()});
    for (const json& c : list) {
      MAITRE_ASSIGN_OR_RETURN(Source s, ParseSource(c, where));
      candidates.push_back(std::move(s));
    }
    if (candidates.empty()) return Bad(where, "names no source");
    spec.outputs[it.key()] = std::move(candidates);
  }
  return spec;
}

namespace {

// Kahn's algorithm; on a cycle, names a vertex on it (the first left over).
absl::StatusOr<std::vector<int32_t>> TopologicalOrder(const ValidatedPipeline& p) {
  const size_t n = p.spec.vertices.size();
  std::vector<int32_t> indegree(n, 0);
  std::vector<std::vector<int32_t>> next(n);
  for (const Edge& e : p.edges) {
    const int32_t from = p.VertexIndex(e.from), to = p.VertexIndex(e.to);
    next[from].push_back(to);
    ++indegree[to];
  }
  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) order.push_back(static_cast<int32_t>(i));
  }
  for (size_t head = 0; head < order.size(); ++head) {
    for (int32_t to : next[order[head]]) {
      if (--indegree[to] == 0) order.push_back(to);
    }
  }
  if (order.size() == n) return order;
  // A vertex left with indegree > 0 that is reachable from itself lies on
  // the cycle; the others merely wait behind it.
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) continue;
    std::vector<bool> seen(n, false);
    std::vector<int32_t> stack = next[i];
    while (!stack.empty()) {
      const int32_t v = stack.back();
      stack.pop_back();
      if (v == static_cast<int32_t>(i)) {
        return Bad(VertexWhere(p.spec.vertices[i].name), "lies on a cycle");
      }
      if (seen[v]) continue;
      seen[v] = true;
      stack.insert(stack.end(), next[v].begin(), next[v].end());
    }
  }
  return absl::InternalError("cycle without a vertex on it");
}

}  // namespace

absl::StatusOr<ValidatedPipeline> ValidatePipeline(
    PipelineSpec spec, const std::map<std::string, ModelSpec>& models) {
  ValidatedPipeline p;
  p.spec = std::move(spec);
  std::set<std::string> names;
  for (const Vertex& v : p.spec.vertices) {
    if (v.name.empty() || v.name.find('.') != std::string::npos || v.name[0] == '$') {
      return Bad(VertexWhere(v.name), "a vertex name must be non-empty, without '.' or a "
                                      "leading '$'");
    }
    if (!names.insert(v.name).second) return Bad(VertexWhere(v.name), "is named twice");
    if (models.count(v.model) == 0) {
      return Bad(VertexWhere(v.name), absl::StrCat("unknown model \"", v.model, "\""));
    }
  }
  // The type a source delivers, after its transform; `where` names the user.
  auto source_type = [&](const Source& s, const std::string& where) -> absl::StatusOr<TensorSpec> {
    if (s.vertex.empty()) {
      return Bad(where, "an output comes from a vertex, not straight from a pipeline input");
    }
    const int32_t from = p.VertexIndex(s.vertex);
    if (from < 0) return Bad(where, absl::StrCat("unknown vertex \"", s.vertex, "\""));
    const ModelSpec& m = models.at(p.spec.vertices[from].model);
    const TensorSpec* out = FindTensor(m.outputs, s.tensor);
    if (out == nullptr) {
      return Bad(where, absl::StrCat("vertex \"", s.vertex, "\" (model \"",
                                     p.spec.vertices[from].model, "\") has no output \"",
                                     s.tensor, "\""));
    }
    auto t = ApplyTransform(s.transform, *out);
    if (!t.ok()) return Bad(where, t.status().message());
    return t;
  };
  std::map<std::string, TensorSpec> pipeline_inputs;
  std::map<std::pair<std::string, std::string>, Edge> edges;  // (from, to)
  for (const Vertex& v : p.spec.vertices) {
    const ModelSpec& m = models.at(v.model);
    for (const auto& [input, source] : v.inputs) {
      if (FindTensor(m.inputs, input) == nullptr) {
        return Bad(VertexWhere(v.name),
                   absl::StrCat("model \"", v.model, "\" has no input \"", input, "\""));
      }
    }
    for (const TensorSpec& want : m.inputs) {
      const std::string where = absl::StrCat(VertexWhere(v.name), " input \"", want.name, "\"");
      auto it = v.inputs.find(want.name);
      if (it == v.inputs.end()) return Bad(where, "is not bound to a source");
      const Source& s = it->second;
      if (s.vertex.empty()) {
        if (s.transform != Transform::kIdentity) {
          return Bad(where, "transforms apply to vertex outputs, not pipeline inputs");
        }
        auto [known, fresh] = pipeline_inputs.emplace(s.tensor, want);
        known->second.name = s.tensor;
        if (!fresh && (known->second.dtype != want.dtype ||
                       !SameShape(known->second.shape, want.shape))) {
          return Bad(where, absl::StrCat("pipeline input \"$", s.tensor, "\" feeds ",
                                         Describe(known->second), " elsewhere but ",
                                         Describe(want), " here"));
        }
        continue;
      }
      if (s.vertex == v.name) return Bad(where, "reads the vertex's own output: a cycle");
      MAITRE_ASSIGN_OR_RETURN(TensorSpec got, source_type(s, where));
      if (got.dtype != want.dtype || !SameShape(got.shape, want.shape)) {
        return Bad(where, absl::StrCat("type mismatch: \"", s.vertex, ".", s.tensor, "\" gives ",
                                       Describe(got), ", the model takes ", Describe(want)));
      }
      edges.emplace(std::pair{s.vertex, v.name}, Edge{s.vertex, v.name, std::nullopt});
    }
  }
  for (const Edge& e : p.spec.edges) {
    const std::string where = absl::StrCat("edge \"", e.from, "\" -> \"", e.to, "\"");
    if (p.VertexIndex(e.to) < 0) return Bad(where, absl::StrCat("unknown vertex \"", e.to, "\""));
    if (p.VertexIndex(e.from) < 0) {
      return Bad(where, absl::StrCat("unknown vertex \"", e.from, "\""));
    }
    if (e.from == e.to) return Bad(VertexWhere(e.from), "has an edge to itself: a cycle");
    if (e.when) {
      const ModelSpec& m = models.at(p.spec.vertices[p.VertexIndex(e.from)].model);
      const TensorSpec* out = FindTensor(m.outputs, e.when->output);
      if (out == nullptr) {
        return Bad(VertexWhere(e.from),
                   absl::StrCat("the condition on ", where, " reads output \"", e.when->output,
                                "\", which model \"", p.spec.vertices[p.VertexIndex(e.from)].model,
                                "\" does not have"));
      }
      if (!IsFloat(out->dtype) || out->shape.size() != 2) {
        return Bad(VertexWhere(e.from),
                   absl::StrCat("the condition on ", where,
                                " needs [batch, classes] scores, but \"", e.when->output,
                                "\" is ", Describe(*out)));
      }
    }
    auto [it, fresh] = edges.emplace(std::pair{e.from, e.to}, e);
    if (!fresh) {
      if (it->second.when && e.when) return Bad(where, "has two conditions");
      if (e.when) it->second.when = e.when;
    }
  }
  for (auto& [key, e] : edges) p.edges.push_back(std::move(e));
  MAITRE_ASSIGN_OR_RETURN(p.order, TopologicalOrder(p));
  for (const auto& [name, candidates] : p.spec.outputs) {
    const std::string where = absl::StrCat("output \"", name, "\"");
    std::optional<TensorSpec> type;
    for (const Source& s : candidates) {
      MAITRE_ASSIGN_OR_RETURN(TensorSpec t, source_type(s, where));
      if (type && (type->dtype != t.dtype || !SameShape(type->shape, t.shape))) {
        return Bad(where, absl::StrCat("its candidates disagree: ", Describe(*type), " and ",
                                       Describe(t)));
      }
      type = t;
    }
    type->name = name;
    p.outputs[name] = *type;
  }
  for (auto& [name, t] : pipeline_inputs) p.inputs.push_back(t);
  if (p.inputs.empty()) return Bad("pipeline", "no vertex reads a pipeline input (\"$name\")");
  return p;
}

}  // namespace maitre::pipeline
