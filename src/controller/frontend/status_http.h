// How a Status becomes an HTTP status (docs/api.md, "Errors"): every error a
// client can see maps to the code that tells it what to do next.
#pragma once

#include "absl/status/status.h"
#include "http/message.h"

namespace maitre::controller {

inline int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kFailedPrecondition:
      return 422;  // requirements no variant can meet
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

// The error answer for `status`: its HTTP code and its message.
inline http::Response ErrorResponse(const absl::Status& status) {
  return http::Response::Error(HttpStatusFor(status), status.message());
}

}  // namespace maitre::controller
