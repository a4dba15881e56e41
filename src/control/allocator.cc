#include "control/allocator.h"

#include "absl/strings/str_cat.h"
#include "control/infaas_allocator.h"
#include "control/mark_allocator.h"
#include "control/named_factories.h"
#include "control/pipeline_allocator.h"
#include "control/proteus_allocator.h"

namespace maitre::control {
namespace {

NamedFactories<Allocator, AllocatorOptions>& Table() {
  static auto* table = [] {
    auto* t = new NamedFactories<Allocator, AllocatorOptions>("allocator");
    absl::Status added = t->Add(
        "infaas", [](const AllocatorOptions& options) -> absl::StatusOr<std::unique_ptr<Allocator>> {
          auto made = InfaasAllocator::Create(options);
          if (!made.ok()) return made.status();
          return std::unique_ptr<Allocator>(*std::move(made));
        });
    added.Update(t->Add(
        "mark", [](const AllocatorOptions& options) -> absl::StatusOr<std::unique_ptr<Allocator>> {
          auto made = MarkAllocator::Create(options);
          if (!made.ok()) return made.status();
          return std::unique_ptr<Allocator>(*std::move(made));
        }));
    const std::pair<const char*, ProteusMode> proteus[] = {
        {"proteus", ProteusMode::kProteus},
        {"clipper-ht", ProteusMode::kClipperHighThroughput},
        {"clipper-ha", ProteusMode::kClipperHighAccuracy},
        {"sommelier", ProteusMode::kSommelier},
        {"proteus-no-selection", ProteusMode::kNoSelection},
        {"infaas-accuracy", ProteusMode::kInfaasAccuracy}};
    for (const auto& [name, mode] : proteus) {
      added.Update(t->Add(name, [mode = mode](const AllocatorOptions& options)
                                    -> absl::StatusOr<std::unique_ptr<Allocator>> {
        auto made = ProteusAllocator::Create(options, mode);
        if (!made.ok()) return made.status();
        return std::unique_ptr<Allocator>(*std::move(made));
      }));
    }
    (void)added;  // the table is empty here
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
  return Table().Add(name, std::move(factory));
}

absl::StatusOr<std::unique_ptr<Allocator>> CreateAllocator(const std::string& name,
                                                           const AllocatorOptions& options) {
  auto made = Table().Create(name, options);
  if (!made.ok()) return made.status();
  return std::unique_ptr<Allocator>(
      std::make_unique<PipelineAllocator>(*std::move(made), options));
}

absl::Status CheckAllocatorName(const std::string& name) { return Table().CheckKnown(name); }

policy::SelectionOptions SelectionOptionsFor(const std::string& allocator) {
  policy::SelectionOptions options;
  options.load_on_cold_start = allocator == "mark";
  return options;
}

std::string DefaultRouterFor(const std::string& allocator) {
  for (const char* planned :
       {"proteus", "clipper-ht", "clipper-ha", "sommelier", "proteus-no-selection",
        "infaas-accuracy", "mark"}) {
    if (allocator == planned) return "weighted";
  }
  return "infaas";
}

}  // namespace maitre::control
