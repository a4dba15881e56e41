// Serving one query through a pipeline (docs/pipelines.md, "Serving a
// pipeline"): its vertices as their inputs become ready, each dispatched as a
// query of its own through the same path a model query takes (so
// selection, batching and admission apply per stage), each on the rows
// its in-edges let through, then the pipeline's outputs gathered row by
// row from the first candidate that ran.
//
// - One deadline covers the whole pipeline: every stage is dispatched with
//   the pipeline query's arrival time and requirements, so the dispatcher
//   gives it what remains of the pipeline's deadline, never a fresh one.
// - Conditions are judged per row (pipeline/evaluate.h). A stage whose
//   rows are all turned away does not run; the answer lists it as skipped.
// - A stage is dispatched as soon as every stage it takes rows from has
//   answered or been skipped, so stages on separate branches (an image
//   model beside a language model, say) run at once, and a query takes as
//   long as its slowest chain of stages, not their sum.
// - Any stage's failure fails the query, with a message naming the stage.
//
// Thread-safety: RunPipeline may be called from any thread. `dispatch`
// answers on any thread, several of one query's stages at once; the
// query's state is under its own lock, and `done` is called once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "controller/dataplane/dispatcher.h"
#include "controller/frontend/infer_codec.h"
#include "core/clock.h"
#include "pipeline/spec.h"

namespace maitre::controller {

// What one stage did for a query. Times are microseconds from the
// pipeline query's arrival.
struct StageRun {
  std::string vertex;
  std::string model;
  std::string variant;  // the variant that served
  std::string worker;
  int64_t rows = 0;  // of the query's rows, those this stage ran on
  int64_t started_us = 0;
  int64_t finished_us = 0;
  int64_t queue_us = 0;    // the stage's wait at the worker
  int64_t compute_us = 0;  // the stage's batch's executor time
};

struct PipelineAnswer {
  InferResponse response;  // the pipeline's outputs, named as the spec names them
  std::vector<StageRun> stages;      // in the order they ran
  std::vector<std::string> skipped;  // vertices no row reached
};

// Sends one stage's query on; the dispatcher's Infer in the server.
using StageDispatch =
    std::function<void(InferTarget target, InferRequest request, Nanos received, InferDone done)>;
using PipelineDone = absl::AnyInvocable<void(absl::StatusOr<PipelineAnswer>) &&>;

// Serves `request` through `pipeline`. `received` is when the front-end
// received the query. Requests whose inputs are not the pipeline's (a
// missing or unknown input, another datatype, inputs disagreeing on the
// row count) or that ask for an output the pipeline lacks are answered
// InvalidArgument before any stage runs.
void RunPipeline(std::shared_ptr<const pipeline::ValidatedPipeline> pipeline,
                 InferRequest request, Nanos received, const Clock* clock,
                 StageDispatch dispatch, PipelineDone done);

}  // namespace maitre::controller
