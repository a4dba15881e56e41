// Variants, the runnable forms of a model (docs/architecture.md, "Vocabulary"),
// and the requirements a query states.
//
// Thread-safety: value types; not synchronised.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "core/model_spec.h"
#include "core/profile.h"

namespace maitre {

// Which executor runs a variant's file.
enum class Runtime { kTorch, kOpenCv };
absl::string_view RuntimeName(Runtime runtime);  // "torch" | "opencv"

// "fmnist-cnn:torch-opt" names one variant of one model.
struct VariantKey {
  std::string model;
  std::string variant;

  std::string ToString() const { return model + ":" + variant; }
  // Splits at the last ':'; nullopt when there is none or a side is empty.
  static std::optional<VariantKey> Parse(absl::string_view text);
  bool operator==(const VariantKey& o) const { return model == o.model && variant == o.variant; }
  bool operator<(const VariantKey& o) const {
    return model != o.model ? model < o.model : variant < o.variant;
  }
};

// Everything a worker needs to load and run one variant.
struct VariantSpec {
  VariantKey key;
  Runtime runtime = Runtime::kTorch;
  std::string blob;  // content hash of the file the executor loads
  ModelSpec spec;
  // torch: apply torch's optimize_for_inference pass when loading (the
  // torch-opt variant).
  bool optimize_for_inference = false;
};

enum class AccuracySource { kUnknown, kMeasured, kDeclared };
absl::string_view AccuracySourceName(AccuracySource source);

struct Variant {
  VariantKey key;
  Runtime runtime = Runtime::kTorch;
  std::string blob;  // content hash of the file the executor loads
  double accuracy = 0;
  AccuracySource accuracy_source = AccuracySource::kUnknown;
  std::map<std::string, Profile> profiles;  // by worker type name
};

// What a query asks for. Unset fields fall back to the app's defaults.
struct Requirements {
  std::optional<double> latency_ms;
  std::optional<double> min_accuracy;
  std::optional<double> max_cost;  // $/h for the instance share serving it

  // Fields unset here are taken from `defaults`.
  Requirements Or(const Requirements& defaults) const {
    return {latency_ms ? latency_ms : defaults.latency_ms,
            min_accuracy ? min_accuracy : defaults.min_accuracy,
            max_cost ? max_cost : defaults.max_cost};
  }
};

}  // namespace maitre
