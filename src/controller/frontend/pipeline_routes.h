// The HTTP routes of pipelines (docs/api.md, "Pipelines"): registering,
// reading, listing and deleting them under their app, and serving them,
// under /v2/apps/{app}/pipelines/{pipeline} and through the Open
// Inference Protocol's /v2/models/{pipeline}/infer. A pipeline belongs to
// its app: an app's key reaches its pipelines, an admin key all of them.
//
// Thread-safety: thread-safe.
#pragma once

#include <memory>

#include "controller/frontend/http_frontend.h"
#include "controller/pipelines/pipeline_book.h"

namespace maitre::controller {

// Adds the pipeline routes; `options.pipelines` must be set.
void AddPipelineRoutes(const FrontendOptions& options, http::Router& router);

// GET /v2/models/{pipeline}: the Open Inference Protocol's model metadata
// for a pipeline (platform "maitre-pipeline", no versions, its inputs and
// outputs), so clients that read a model's inputs read a pipeline's.
http::Response PipelineMetadata(const ServedPipeline& pipeline);
// GET /v2/models/{pipeline}/ready: 200 when every stage's model is ready
// (on its planned variant), else 503 saying which stage is not.
http::Response PipelineReady(const FrontendOptions& options, const ServedPipeline& pipeline);

// Serves one /infer request through `pipeline`: the answer is the Open
// Inference Protocol's, its parameters naming the stages that ran with
// their timings and the stages skipped.
void ServePipelineQuery(const FrontendOptions& options,
                        std::shared_ptr<const ServedPipeline> pipeline, http::Request&& request,
                        http::Responder respond);

}  // namespace maitre::controller
