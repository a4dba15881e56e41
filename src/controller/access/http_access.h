// Which HTTP routes need which key (docs/operations.md, "API keys"), applied
// before a route's handler runs: the handler is only called for a caller
// its route admits, and is told who that is (to filter what it lists).
// Refusals are 401 (no key, or one the server does not know; with
// WWW-Authenticate: Bearer) and 403 (a valid key that does not reach this).
//
// Thread-safety: thread-safe; the handlers it makes run on I/O threads and
// never block (a key check hashes 32 bytes and reads a map).
#pragma once

#include <functional>

#include <optional>
#include <string>

#include "controller/access/key_ring.h"
#include "http/router.h"

namespace maitre::controller {

// What a route reaches, and so which keys it admits.
enum class Reach {
  kPublic,  // health and server metadata: load balancers call them without keys
  kAnyKey,  // any valid key; the handler shows each caller its own apps only
  kAdmin,   // the server's own state: workers, metrics, every app's profiles
  kApp,     // the app in the {app} path parameter
  kModel,   // the app owning the model in the {model} path parameter
};

using GuardedHandler = std::function<void(http::Request&& request,
                                          const http::PathParams& params,
                                          const Principal& caller, http::Responder respond)>;

// The app owning the model a kModel route's path names; nullopt for an
// unknown model (the route's handler answers that 404).
using ModelOwner = std::function<std::optional<std::string>(const http::PathParams& params)>;

class HttpAccess {
 public:
  // `keys` outlives the handlers made here.
  HttpAccess(const KeyRing* keys, ModelOwner model_owner)
      : keys_(keys), model_owner_(std::move(model_owner)) {}

  // `handler`, run only for callers `reach` admits.
  http::Handler Guard(Reach reach, GuardedHandler handler) const;

  // The caller of `request`, or the refusal to answer it with.
  absl::StatusOr<Principal> Caller(const http::Request& request) const;

 private:
  absl::Status Admit(Reach reach, const http::PathParams& params, const Principal& caller) const;

  const KeyRing* const keys_;
  const ModelOwner model_owner_;
};

// The HTTP response for a refused credential or access: 401 carries
// WWW-Authenticate so clients know to send a bearer key.
http::Response AccessRefusal(const absl::Status& status);

}  // namespace maitre::controller
