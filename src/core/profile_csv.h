// The profile CSV (docs/api.md, "Files"), one row per (variant, worker type,
// batch):
//   model,variant,worker_type,batch,latency_p50_ms,latency_p99_ms,load_ms,memory_mb,accuracy
// It moves profiles between machines and feeds the simulator.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/profile.h"
#include "core/variant.h"

namespace maitre {

// One (variant, worker type) profile and the variant's accuracy.
struct ProfileRecord {
  VariantKey key;
  std::string worker_type;
  double accuracy = 0;
  Profile profile;
  // How many more measurements, taken later, the profiler still means to
  // fold in (Profile::FastestOf); 0 when the profile is final, as imported
  // ones are. Not part of the CSV.
  int sweeps_left = 0;
};

inline constexpr char kProfileCsvHeader[] =
    "model,variant,worker_type,batch,latency_p50_ms,latency_p99_ms,load_ms,memory_mb,accuracy";

std::string WriteProfileCsv(const std::vector<ProfileRecord>& records);

// Groups rows by (model, variant, worker_type). Errors name the line.
absl::StatusOr<std::vector<ProfileRecord>> ParseProfileCsv(absl::string_view text);

}  // namespace maitre
