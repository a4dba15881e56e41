// The HTTP routes that manage API keys (docs/api.md, "API keys"):
//   POST   /v2/keys        {"app"?: NAME, "name"?: TEXT} -> 201 with the key
//   GET    /v2/keys        the keys the caller may see (no secrets)
//   DELETE /v2/keys/{id}   revoke
// An admin key manages every key; an app key manages its own app's keys.
// The whole key is in the 201 answer only: the server keeps its hash.
//
// Thread-safety: the routes are thread-safe; `keys` and `access` outlive
// the router.
#pragma once

#include "controller/access/http_access.h"
#include "controller/access/key_ring.h"
#include "http/router.h"

namespace maitre::controller {

void AddKeyRoutes(http::Router& router, KeyRing* keys, const HttpAccess& access);

}  // namespace maitre::controller
