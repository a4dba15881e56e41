#include "controller/pipelines/pipeline_run.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "core/status_macros.h"
#include "pipeline/evaluate.h"

namespace maitre::controller {
namespace {

using pipeline::Source;
using pipeline::ValidatedPipeline;

// What one vertex produced: the query's rows it ran on (ascending), and
// its outputs, whose row i belongs to the query's row rows[i].
struct VertexResult {
  bool ran = false;
  std::vector<int64_t> rows;
  std::vector<int64_t> position;  // query row -> index into rows, or -1
  std::vector<Tensor> outputs;

  const Tensor* Output(absl::string_view name) const {
    for (const Tensor& t : outputs) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
};

// Where each vertex is in one query's run.
enum class VertexState { kWaiting, kRunning, kRan, kSkipped };

struct Run {
  std::shared_ptr<const ValidatedPipeline> pipeline;
  InferRequest request;
  Nanos received = 0;
  const Clock* clock = nullptr;
  StageDispatch dispatch;
  int64_t rows = 0;
  // Stages on separate branches answer on different threads at once.
  absl::Mutex mu;
  PipelineDone done ABSL_GUARDED_BY(mu);  // empty once the query is answered
  std::vector<VertexResult> results ABSL_GUARDED_BY(mu);  // by vertex index
  std::vector<VertexState> state ABSL_GUARDED_BY(mu);     // by vertex index
  int running ABSL_GUARDED_BY(mu) = 0;
  PipelineAnswer answer ABSL_GUARDED_BY(mu);
};

int64_t MicrosSince(const Run& run) { return (run.clock->Now() - run.received) / 1000; }

// `positions` of the rows of `t` (whose first dimension counts rows), in
// that order.
Tensor GatherRows(const Tensor& t, const std::vector<int64_t>& positions) {
  Tensor out;
  out.name = t.name;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.shape[0] = static_cast<int64_t>(positions.size());
  const size_t row_bytes = t.shape[0] == 0 ? 0 : t.data.size() / t.shape[0];
  out.data.reserve(row_bytes * positions.size());
  for (int64_t p : positions) out.data.append(t.data, p * row_bytes, row_bytes);
  return out;
}

// The pipeline's inputs, checked against what the validation fixed; sets
// run.rows.
absl::Status CheckInputs(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(run.mu) {
  const ValidatedPipeline& p = *run.pipeline;
  for (const Tensor& t : run.request.inputs) {
    bool known = false;
    for (const TensorSpec& spec : p.inputs) known = known || spec.name == t.name;
    if (!known) {
      std::vector<std::string> names;
      for (const TensorSpec& spec : p.inputs) names.push_back(spec.name);
      return absl::InvalidArgumentError(absl::StrCat("pipeline '", p.spec.name, "' has no input '",
                                                     t.name, "'; its inputs: ",
                                                     absl::StrJoin(names, ", ")));
    }
  }
  run.rows = -1;
  for (const TensorSpec& spec : p.inputs) {
    const Tensor* found = nullptr;
    for (const Tensor& t : run.request.inputs) {
      if (t.name == spec.name) found = &t;
    }
    const std::string where = absl::StrCat("input '", spec.name, "'");
    if (found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is missing"));
    }
    if (found->dtype != spec.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is ", DataTypeName(found->dtype),
                                                     "; the pipeline takes ",
                                                     DataTypeName(spec.dtype)));
    }
    bool shape_ok = found->shape.size() == spec.shape.size() && !found->shape.empty();
    for (size_t d = 0; shape_ok && d < spec.shape.size(); ++d) {
      shape_ok = spec.shape[d] == -1 || spec.shape[d] == found->shape[d];
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has shape ",
                                                     ShapeToString(found->shape),
                                                     "; the pipeline takes ",
                                                     ShapeToString(spec.shape)));
    }
    MAITRE_RETURN_IF_ERROR(found->Validate());
    if (found->shape[0] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has no rows"));
    }
    if (run.rows != -1 && found->shape[0] != run.rows) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has ", found->shape[0],
                                                     " rows; another input has ", run.rows));
    }
    run.rows = found->shape[0];
  }
  for (const RequestedOutput& o : run.request.outputs) {
    if (p.outputs.count(o.name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline '", p.spec.name, "' has no output '", o.name, "'"));
    }
  }
  return absl::OkStatus();
}

// The query rows vertex `v` runs on: those every in-edge lets through.
absl::StatusOr<std::vector<int64_t>> RowsFor(const Run& run, int32_t v)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(run.mu) {
  const ValidatedPipeline& p = *run.pipeline;
  std::vector<bool> keep(run.rows, true);
  for (const pipeline::Edge& e : p.edges) {
    if (e.to != p.spec.vertices[v].name) continue;
    const VertexResult& from = run.results[p.VertexIndex(e.from)];
    std::vector<bool> through(run.rows, false);
    std::vector<bool> holds;
    if (from.ran && e.when.has_value()) {
      const Tensor* scores = from.Output(e.when->output);
      if (scores == nullptr) {
        return absl::InternalError(absl::StrCat("stage \"", e.from, "\" gave no output \"",
                                                e.when->output, "\""));
      }
      auto evaluated = pipeline::EvaluatePredicate(*e.when, *scores);
      if (!evaluated.ok()) {
        return absl::Status(evaluated.status().code(),
                            absl::StrCat("edge \"", e.from, "\" -> \"", e.to,
                                         "\": ", evaluated.status().message()));
      }
      holds = *std::move(evaluated);
    }
    for (size_t i = 0; from.ran && i < from.rows.size(); ++i) {
      through[from.rows[i]] = holds.empty() || holds[i];
    }
    for (int64_t r = 0; r < run.rows; ++r) keep[r] = keep[r] && through[r];
  }
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < run.rows; ++r) {
    if (keep[r]) rows.push_back(r);
  }
  return rows;
}

// `source` for the query rows `rows`, after its transform.
absl::StatusOr<Tensor> Read(const Run& run, const Source& source,
                            const std::vector<int64_t>& rows)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(run.mu) {
  const Tensor* t = nullptr;
  std::vector<int64_t> positions = rows;
  if (source.vertex.empty()) {
    for (const Tensor& in : run.request.inputs) {
      if (in.name == source.tensor) t = &in;
    }
  } else {
    const VertexResult& from = run.results[run.pipeline->VertexIndex(source.vertex)];
    t = from.Output(source.tensor);
    for (int64_t& p : positions) p = from.position[p];
  }
  if (t == nullptr) {
    return absl::InternalError(absl::StrCat("no tensor \"", source.tensor, "\" from \"",
                                            source.vertex, "\""));
  }
  return pipeline::ApplyTransform(source.transform, GatherRows(*t, positions));
}

// The pipeline's outputs, each row from the first candidate that ran on it.
absl::StatusOr<std::vector<Tensor>> GatherOutputs(const Run& run)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(run.mu) {
  const ValidatedPipeline& p = *run.pipeline;
  std::vector<Tensor> outputs;
  for (const auto& [name, candidates] : p.spec.outputs) {
    bool wanted = run.request.outputs.empty();
    for (const RequestedOutput& o : run.request.outputs) wanted = wanted || o.name == name;
    if (!wanted) continue;
    Tensor out;
    out.name = name;
    for (int64_t r = 0; r < run.rows; ++r) {
      const Source* chosen = nullptr;
      for (const Source& c : candidates) {
        const VertexResult& from = run.results[p.VertexIndex(c.vertex)];
        if (from.ran && from.position[r] >= 0) {
          chosen = &c;
          break;
        }
      }
      if (chosen == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "output \"", name, "\": none of its candidate stages ran on row ", r));
      }
      MAITRE_ASSIGN_OR_RETURN(Tensor row, Read(run, *chosen, {r}));
      if (r == 0) {
        out.dtype = row.dtype;
        out.shape = row.shape;
        out.shape[0] = run.rows;
      } else if (row.dtype != out.dtype ||
                 std::vector<int64_t>(row.shape.begin() + 1, row.shape.end()) !=
                     std::vector<int64_t>(out.shape.begin() + 1, out.shape.end())) {
        return absl::InternalError(absl::StrCat("output \"", name,
                                                "\": its candidates answered different shapes"));
      }
      out.data.append(row.data);
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

// Takes the query's callback if no answer has been given yet (the first
// failing stage answers; stages still running are then ignored).
PipelineDone TakeDone(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(run.mu) {
  PipelineDone done = std::move(run.done);
  run.done = nullptr;
  return done;
}

void Answer(PipelineDone done, absl::StatusOr<PipelineAnswer> answer) {
  if (done) std::move(done)(std::move(answer));
}

void Step(const std::shared_ptr<Run>& run);

void OnStageDone(std::shared_ptr<Run> run, int32_t v, std::vector<int64_t> rows,
                 int64_t started_us, absl::StatusOr<InferResponse> result) {
  const pipeline::Vertex& vertex = run->pipeline->spec.vertices[v];
  absl::Status failed;
  if (!result.ok()) {
    failed = absl::Status(result.status().code(),
                          absl::StrCat("stage \"", vertex.name, "\" (model ", vertex.model,
                                       "): ", result.status().message()));
  } else {
    for (const Tensor& t : result->outputs) {
      if (t.shape.empty() || t.shape[0] != static_cast<int64_t>(rows.size())) {
        failed = absl::InternalError(absl::StrCat("stage \"", vertex.name, "\" answered ",
                                                  ShapeToString(t.shape), " for ", rows.size(),
                                                  " rows"));
        break;
      }
    }
  }
  PipelineDone answer_failure;
  {
    absl::MutexLock lock(&run->mu);
    --run->running;
    if (!failed.ok()) answer_failure = TakeDone(*run);
  }
  if (!failed.ok()) {
    Answer(std::move(answer_failure), failed);
    return;
  }
  {
    absl::MutexLock lock(&run->mu);
    VertexResult& r = run->results[v];
    r.ran = true;
    r.position.assign(run->rows, -1);
    for (size_t i = 0; i < rows.size(); ++i) r.position[rows[i]] = static_cast<int64_t>(i);
    r.rows = std::move(rows);
    r.outputs = std::move(result->outputs);
    run->state[v] = VertexState::kRan;
    StageRun stage;
    stage.vertex = vertex.name;
    stage.model = vertex.model;
    stage.variant = result->model_version;
    stage.worker = result->timings.worker;
    stage.rows = static_cast<int64_t>(r.rows.size());
    stage.started_us = started_us;
    stage.finished_us = MicrosSince(*run);
    stage.queue_us = result->timings.queue_us;
    stage.compute_us = result->timings.compute_us;
    run->answer.stages.push_back(std::move(stage));
  }
  Step(run);
}

// Whether every vertex `v` takes rows from has ran or been skipped.
bool SourcesSettled(const Run& run, int32_t v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(run.mu) {
  const ValidatedPipeline& p = *run.pipeline;
  for (const pipeline::Edge& e : p.edges) {
    if (e.to != p.spec.vertices[v].name) continue;
    const VertexState from = run.state[p.VertexIndex(e.from)];
    if (from != VertexState::kRan && from != VertexState::kSkipped) return false;
  }
  return true;
}

// Dispatches every waiting vertex whose sources have settled, each on the
// rows they let through (skipping those left with none), or, once nothing
// runs or waits, answers.
void Step(const std::shared_ptr<Run>& run) {
  const ValidatedPipeline& p = *run->pipeline;
  struct Launch {
    int32_t v;
    std::vector<int64_t> rows;
    InferRequest stage;
  };
  std::vector<Launch> launches;
  PipelineDone done;
  absl::StatusOr<PipelineAnswer> answer = absl::UnknownError("unanswered");
  {
    absl::MutexLock lock(&run->mu);
    if (!run->done) return;  // already answered
    // In the validated order, a vertex skipped here settles those after it
    // in the same pass.
    for (const int32_t v : p.order) {
      if (run->state[v] != VertexState::kWaiting || !SourcesSettled(*run, v)) continue;
      const pipeline::Vertex& vertex = p.spec.vertices[v];
      absl::StatusOr<std::vector<int64_t>> rows = RowsFor(*run, v);
      if (!rows.ok()) {
        done = TakeDone(*run);
        answer = rows.status();
        break;
      }
      if (rows->empty()) {
        run->state[v] = VertexState::kSkipped;
        run->answer.skipped.push_back(vertex.name);
        continue;
      }
      Launch launch{v, *std::move(rows), {}};
      launch.stage.id = run->request.id;
      launch.stage.requirements = run->request.requirements;
      launch.stage.offline = run->request.offline;
      launch.stage.client_deadline = run->request.client_deadline;
      absl::Status read;
      for (const auto& [input, source] : vertex.inputs) {
        auto t = Read(*run, source, launch.rows);
        if (!t.ok()) {
          read = t.status();
          break;
        }
        t->name = input;
        launch.stage.inputs.push_back(*std::move(t));
      }
      if (!read.ok()) {
        done = TakeDone(*run);
        answer = read;
        break;
      }
      run->state[v] = VertexState::kRunning;
      ++run->running;
      launches.push_back(std::move(launch));
    }
    if (!done && launches.empty() && run->running == 0) {
      done = TakeDone(*run);
      auto outputs = GatherOutputs(*run);
      if (!outputs.ok()) {
        answer = outputs.status();
      } else {
        InferResponse& response = run->answer.response;
        response.model_name = p.spec.name;
        response.id = run->request.id;
        response.outputs = *std::move(outputs);
        response.timings.total_us = MicrosSince(*run);
        response.timings.batch_size = static_cast<int32_t>(run->rows);
        answer = std::move(run->answer);
      }
    }
  }
  if (done) {
    Answer(std::move(done), std::move(answer));
    return;
  }
  // Outside the lock: a dispatch may answer at once, on this thread.
  for (Launch& launch : launches) {
    const int64_t started_us = MicrosSince(*run);
    const pipeline::Vertex& vertex = p.spec.vertices[launch.v];
    run->dispatch(InferTarget{"", vertex.model, ""}, std::move(launch.stage), run->received,
                  [run, v = launch.v, rows = std::move(launch.rows), started_us](
                      absl::StatusOr<InferResponse> result) mutable {
                    OnStageDone(std::move(run), v, std::move(rows), started_us,
                                std::move(result));
                  });
  }
}

}  // namespace

void RunPipeline(std::shared_ptr<const ValidatedPipeline> pipeline, InferRequest request,
                 Nanos received, const Clock* clock, StageDispatch dispatch,
                 PipelineDone done) {
  auto run = std::make_shared<Run>();
  run->pipeline = std::move(pipeline);
  run->request = std::move(request);
  run->received = received;
  run->clock = clock;
  run->dispatch = std::move(dispatch);
  absl::Status checked;
  PipelineDone refused;
  {
    absl::MutexLock lock(&run->mu);
    run->done = std::move(done);
    run->results.resize(run->pipeline->spec.vertices.size());
    run->state.assign(run->pipeline->spec.vertices.size(), VertexState::kWaiting);
    checked = CheckInputs(*run);
    if (!checked.ok()) refused = TakeDone(*run);
  }
  if (!checked.ok()) {
    Answer(std::move(refused), checked);
    return;
  }
  Step(run);
}

}  // namespace maitre::controller
