// Whole-file reads and atomic writes.
//
// Thread-safety: functions are safe to call concurrently; concurrent writers
// of one path leave one complete version (the last rename wins).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace maitre {

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes to a temporary file beside `path`, flushes it and renames it into
// place, so readers never see a partial file.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// mkdir -p.
absl::Status MakeDirectories(const std::string& path);

}  // namespace maitre
