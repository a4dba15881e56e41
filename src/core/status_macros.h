// absl::Status plumbing used at every module boundary (docs/architecture.md,
// "Conventions").
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MAITRE_CONCAT_INNER_(a, b) a##b
#define MAITRE_CONCAT_(a, b) MAITRE_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function if it is not OK.
#define MAITRE_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status maitre_status_ = (expr);          \
    if (!maitre_status_.ok()) return maitre_status_; \
  } while (0)

// `lhs = value of expr`, or returns its error status.
#define MAITRE_ASSIGN_OR_RETURN(lhs, expr) \
  MAITRE_ASSIGN_OR_RETURN_IMPL_(MAITRE_CONCAT_(maitre_statusor_, __LINE__), lhs, expr)

#define MAITRE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
