// Who is calling (docs/operations.md, "API keys"): the controller's API keys,
// read from the registry's KeyStore once and kept in memory, and the check
// of a presented key. A key is "mk_<id>_<secret>": the id finds the record,
// and the SHA-256 of the secret must equal the stored one (compared in
// constant time). An admin key reaches every app and the server's own
// routes; an app key reaches its app's models, jobs, defaults, profiles and
// keys only.
//
// With authentication off (a server on loopback), every caller is the
// anonymous admin, and keys can still be made for a later start with it on.
//
// Thread-safety: thread-safe. Authenticate takes a reader lock only; the
// key-management calls write the registry first and then the memory.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "controller/registry/key_store.h"

namespace maitre::controller {

// The caller, once its key checked out.
struct Principal {
  std::string key_id;  // "" for the anonymous admin of a server without keys
  bool admin = false;
  std::string app;  // the one app a non-admin key reaches
};

// OK when `who` may reach `app`; PermissionDenied naming both otherwise.
absl::Status CheckAppAccess(const Principal& who, absl::string_view app);
// OK for an admin key; PermissionDenied naming `what` otherwise.
absl::Status CheckAdminAccess(const Principal& who, absl::string_view what);

// A key as made: its record and the whole key, which is shown once.
struct NewApiKey {
  registry::ApiKeyRecord record;
  std::string key;
};

class KeyRing {
 public:
  struct Options {
    registry::KeyStore* store = nullptr;
    bool required = false;  // false: every caller is the anonymous admin
  };

  // Reads every stored key.
  explicit KeyRing(Options options);

  bool required() const { return options_.required; }

  // The caller presenting `authorization` (an HTTP Authorization header or
  // gRPC "authorization" metadata value: "Bearer <key>"). Unauthenticated,
  // with a message saying what to send, when keys are required and it is
  // missing, malformed, unknown or revoked.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization) const;

  // Makes a key: an admin key when `app` is empty, else `app`'s. `by` must
  // be an admin, or hold a key of that same app.
  absl::StatusOr<NewApiKey> Create(const Principal& by, absl::string_view app,
                                   absl::string_view name);
  // The keys `by` may see: all for an admin, its app's for an app key.
  std::vector<registry::ApiKeyRecord> List(const Principal& by) const;
  // Revokes key `id`. The last admin key cannot be revoked (nobody could
  // manage keys afterwards): FailedPrecondition.
  absl::Status Revoke(const Principal& by, absl::string_view id);
  // Revokes every key of a deleted app; returns how many.
  absl::StatusOr<int> ForgetApp(absl::string_view app);

  // When keys are required and no admin key exists: makes one, writes it
  // to `path` (mode 0600, created exclusively) and returns true.
  absl::StatusOr<bool> EnsureAdminKey(const std::string& path);

 private:
  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, registry::ApiKeyRecord, std::less<>> by_id_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
