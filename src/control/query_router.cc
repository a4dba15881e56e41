#include "control/query_router.h"

#include "control/named_factories.h"

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

NamedFactories<QueryRouter, policy::SelectionOptions>& Table() {
  static auto* table = [] {
    auto* t = new NamedFactories<QueryRouter, policy::SelectionOptions>("query router");
    absl::Status added = t->Add("infaas", [](const policy::SelectionOptions& options)
                                              -> absl::StatusOr<std::unique_ptr<QueryRouter>> {
      return std::make_unique<SelectionPolicyRouter>(options);
    });
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
