#include "control/query_router.h"

#include "absl/synchronization/mutex.h"
#include "control/named_factories.h"
#include "policy/selection_weighted.h"

namespace maitre::control {
namespace {

// INFaaS variant selection, as the policy decides it.
class SelectionPolicyRouter : public QueryRouter {
 public:
  explicit SelectionPolicyRouter(const policy::SelectionOptions& options) : options_(options) {}
  policy::SelectionDecision Route(const policy::SelectionIndex& index,
                                  const policy::LiveState& live,
                                  const policy::SelectionRequest& request) const override {
    return policy::Select(index, live, request, options_);
  }

 private:
  const policy::SelectionOptions options_;
};

// Proteus's query assignment: the plan's route weights, by smooth weighted
// round-robin (policy/selection_weighted.h); `uniform` ignores them.
class WeightedRouter : public QueryRouter {
 public:
  WeightedRouter(const policy::SelectionOptions& options, bool uniform)
      : options_(options), rotation_(uniform) {}
  policy::SelectionDecision Route(const policy::SelectionIndex& index,
                                  const policy::LiveState& live,
                                  const policy::SelectionRequest& request) const override {
    absl::MutexLock lock(&mu_);
    return rotation_.Route(index, live, request, options_);
  }

 private:
  const policy::SelectionOptions options_;
  mutable absl::Mutex mu_;
  mutable policy::WeightedRoundRobin rotation_ ABSL_GUARDED_BY(mu_);
};

NamedFactories<QueryRouter, policy::SelectionOptions>& Table() {
  static auto* table = [] {
    auto* t = new NamedFactories<QueryRouter, policy::SelectionOptions>("query router");
    absl::Status added = t->Add("infaas", [](const policy::SelectionOptions& options)
                                              -> absl::StatusOr<std::unique_ptr<QueryRouter>> {
      return std::make_unique<SelectionPolicyRouter>(options);
    });
    for (bool uniform : {false, true}) {
      added.Update(t->Add(uniform ? "uniform" : "weighted",
                          [uniform](const policy::SelectionOptions& options)
                              -> absl::StatusOr<std::unique_ptr<QueryRouter>> {
                            return std::make_unique<WeightedRouter>(options, uniform);
                          }));
    }
    (void)added;  // the table is empty here
    return t;
  }();
  return *table;
}

}  // namespace

absl::Status AddQueryRouter(const std::string& name, QueryRouterFactory factory) {
  return Table().Add(name, std::move(factory));
}

absl::StatusOr<std::unique_ptr<QueryRouter>> CreateQueryRouter(
    const std::string& name, const policy::SelectionOptions& options) {
  return Table().Create(name, options);
}

absl::Status CheckQueryRouterName(const std::string& name) { return Table().CheckKnown(name); }

}  // namespace maitre::control
