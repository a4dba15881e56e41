// The query-routing seam (docs/architecture.md, "One control plane"): given
// one query and the live view of the cluster, choose the instance that
// serves it (and any load to start). The controller's Cluster and the
// simulator's SelectionRouter keep the live view and carry the decision
// out; the choosing is a QueryRouter, chosen by name (`maitre serve
// --router`, experiment key `policies.selection.router`). "infaas" (the
// selection policy, policy/selection.h) is built in, and so are
// "weighted" (the allocator's route weights by smooth weighted round-robin,
// policy/selection_weighted.h; Proteus's query assignment) and "uniform"
// (every instance of the app alike).
//
// Thread-safety: a QueryRouter's Route is const and may be called from
// several threads; the table of names is thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/selection.h"
#include "policy/selection_index.h"
#include "policy/selection_live.h"

namespace maitre::control {

class QueryRouter {
 public:
  virtual ~QueryRouter() = default;
  virtual policy::SelectionDecision Route(const policy::SelectionIndex& index,
                                          const policy::LiveState& live,
                                          const policy::SelectionRequest& request) const = 0;
};

using QueryRouterFactory =
    std::function<absl::StatusOr<std::unique_ptr<QueryRouter>>(const policy::SelectionOptions&)>;

// Makes `name` available to CreateQueryRouter; AlreadyExists if taken.
absl::Status AddQueryRouter(const std::string& name, QueryRouterFactory factory);
// InvalidArgument, listing the names, for an unknown one.
absl::StatusOr<std::unique_ptr<QueryRouter>> CreateQueryRouter(
    const std::string& name, const policy::SelectionOptions& options);
// InvalidArgument, listing the names, unless `name` is known.
absl::Status CheckQueryRouterName(const std::string& name);

}  // namespace maitre::control
