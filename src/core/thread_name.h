// Names the calling thread, as `top`, /proc/PID/task/*/comm and perf show
// it, so that CPU time can be split by what a thread does (the throughput
// experiment reads it; docs/architecture.md, "Where a query's time goes").
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace maitre {

// Linux keeps 15 bytes of a name; longer names are cut.
void NameThisThread(absl::string_view name);
// The calling thread's name.
std::string ThisThreadName();

}  // namespace maitre
