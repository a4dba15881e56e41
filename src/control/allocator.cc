#include "control/allocator.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "control/infaas_allocator.h"

namespace maitre::control {
namespace {

struct AllocatorTable {
  absl::Mutex mu;
  std::map<std::string, AllocatorFactory> factories ABSL_GUARDED_BY(mu);
};

AllocatorTable& Table() {
  static AllocatorTable* table = [] {
    auto* t = new AllocatorTable;
    t->factories["infaas"] =
        [](const AllocatorOptions& options) -> absl::StatusOr<std::unique_ptr<Allocator>> {
      auto made = InfaasAllocator::Create(options);
      if (!made.ok()) return made.status();
      return std::unique_ptr<Allocator>(*std::move(made));
    };
    return t;
  }();
  return *table;
}

}  // namespace

absl::string_view ModelScalingName(ModelScaling scaling) {
  switch (scaling) {
    case ModelScaling::kOff:
      return "off";
    case ModelScaling::kInfaas:
      return "infaas";
    case ModelScaling::kHorizontal:
      return "horizontal";
  }
  return "unknown";
}

absl::StatusOr<ModelScaling> ParseModelScaling(absl::string_view name) {
  for (ModelScaling s : {ModelScaling::kOff, ModelScaling::kInfaas, ModelScaling::kHorizontal}) {
    if (name == ModelScalingName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model autoscaler \"", name, "\"; use infaas, horizontal or off"));
}

absl::Status AddAllocator(const std::string& name, AllocatorFactory factory) {
  AllocatorTable& table = Table();
  absl::MutexLock lock(&table.mu);
  if (!table.factories.emplace(name, std::move(factory)).second) {
    return absl::AlreadyExistsError(absl::StrCat("an allocator named \"", name, "\" exists"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Allocator>> CreateAllocator(const std::string& name,
                                                           const AllocatorOptions& options) {
  AllocatorFactory factory;
  {
    AllocatorTable& table = Table();
    absl::MutexLock lock(&table.mu);
    auto it = table.factories.find(name);
    if (it != table.factories.end()) factory = it->second;
  }
  if (!factory) {
    return absl::InvalidArgumentError(absl::StrCat("unknown allocator \"", name, "\"; known: ",
                                                   absl::StrJoin(AllocatorNames(), ", ")));
  }
  return factory(options);
}

std::vector<std::string> AllocatorNames() {
  AllocatorTable& table = Table();
  absl::MutexLock lock(&table.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : table.factories) names.push_back(name);
  return names;
}

}  // namespace maitre::control
