// What the controller can ask of one worker, independent of transport
// (docs/architecture.md, "Conventions"): the real implementation speaks gRPC;
// tests substitute fakes.
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "core/time.h"
#include "core/variant.h"

namespace maitre::controller {

struct WorkerReply {
  std::vector<Tensor> outputs;
  int64_t queue_us = 0;
  int64_t compute_us = 0;
  int64_t total_us = 0;  // at the worker
  int32_t batch_size = 0;
  // How long the query waited in the controller for a call to the worker
  // (CallCoalescer): queueing, like the worker's, not a round trip's cost.
  Nanos held = 0;
};

using WorkerReplyCallback = absl::AnyInvocable<void(absl::StatusOr<WorkerReply>) &&>;

struct LoadResult {
  double load_ms = 0;
  double memory_mb = 0;
};

struct ProfileRequest {
  std::vector<int> batch_sizes;  // empty: the worker's default ladder
  double latency_ceiling_ms = 0;  // 0: the worker's default
  int warmup = 0;
  int repetitions = 0;
  int rounds = 0;                // sweeps within the call; 0: the worker's default
  std::vector<Tensor> sample;    // one example row, or empty for zeros
};

struct Evaluation {
  double accuracy = 0;
  int64_t examples = 0;
};

class WorkerApi {
 public:
  virtual ~WorkerApi() = default;

  // Runs a query; `done` is called exactly once, on a thread of the
  // transport's, and must not block. The inputs are shared so that a query
  // whose worker is lost can be sent again elsewhere.
  // A best-effort query has no latency objective and is never held back to
  // build a batch. The worker aims to answer `reply_margin` before the
  // timeout, the time the answer needs to travel back.
  struct InferOptions {
    Nanos timeout = 0;
    Nanos reply_margin = 0;
    bool best_effort = false;
    // Time to the latency objective (batching aims for it); 0 = none.
    Nanos objective = 0;
  };
  virtual void Infer(const VariantKey& key, std::shared_ptr<const std::vector<Tensor>> inputs,
                     const InferOptions& options, WorkerReplyCallback done) = 0;

  // Control path: these block the calling thread.
  // `max_batch` > 0 caps the instance's batches (a pipeline stage's planned
  // batch); 0 leaves the worker's own limit.
  virtual absl::StatusOr<LoadResult> Load(const VariantSpec& spec, int replicas,
                                          const std::vector<LatencyPoint>& profile,
                                          int32_t max_batch) = 0;
  virtual absl::Status Unload(const VariantKey& key) = 0;
  virtual absl::StatusOr<Profile> ProfileVariant(const VariantSpec& spec,
                                                 const ProfileRequest& request) = 0;
  virtual absl::StatusOr<Evaluation> Evaluate(const VariantSpec& spec,
                                              const std::string& valset_blob,
                                              int batch_size) = 0;
  // Runs `spec` once on `inputs` without loading it as an instance; the
  // outputs in spec order (registration compares a model's parts this way).
  virtual absl::StatusOr<std::vector<Tensor>> RunOnce(const VariantSpec& spec,
                                                      const std::vector<Tensor>& inputs) = 0;
};

// Told how many queries each Infer call to a worker carries (the
// queries-per-call metric), on the thread that sends the call.
using WorkerCallObserver = std::function<void(int queries)>;

// A WorkerApi over gRPC to the worker listening at `address`, whose calls
// carry `call_token` (the worker refuses calls without it).
std::unique_ptr<WorkerApi> NewGrpcWorkerApi(const std::string& address,
                                            const std::string& call_token,
                                            WorkerCallObserver on_call = nullptr);

}  // namespace maitre::controller
