// FUZZ_CHECK: a property a fuzz target asserts about what it parsed. A
// failed check prints what broke and aborts, which libFuzzer reports as a
// crash and saves the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"

#define FUZZ_CHECK(condition, ...)                                                            \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, #condition); \
      std::fprintf(stderr, __VA_ARGS__);                                                      \
      std::fputc('\n', stderr);                                                               \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace maitre::fuzz {

// Every refusal of a client's bytes must be InvalidArgument, which the
// front-ends answer with 400 (docs/api.md, "Errors"): anything else would
// reach the client as a 500.
inline void CheckClientError(const absl::Status& status) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, "%s", status.ToString().c_str());
}

}  // namespace maitre::fuzz
