// The durable records of API keys (docs/operations.md, "API keys"): the
// `api_keys` table of the registry's SQLite file (schema migration 6). A key
// is "mk_<id>_<secret>"; the store keeps the id, the SHA-256 of the secret
// and what the key may reach, never the secret itself, so a copy of the
// file lets nobody call the server. The controller's KeyRing
// (controller/access) reads the records once and keeps them in memory.
//
// Errors: InvalidArgument for a malformed record, AlreadyExists for a taken
// id, NotFound for an unknown id, Unavailable when another process holds
// the file's lock too long.
//
// Thread-safety: thread-safe; shares the registry's connection and mutex,
// as JobStore does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace maitre::registry {

class Connection;

struct ApiKeyRecord {
  std::string id;             // public: names the key in listings and logs
  std::string secret_sha256;  // 64 lowercase hex digits
  bool admin = false;         // admin: every app and the server's own routes
  std::string app;            // the one app a non-admin key reaches
  std::string name;           // what the key is for, as its creator said
  int64_t created_unix_ms = 0;
};

class KeyStore {
 public:
  // Works on `db` under `mu`, which guards it; both belong to the Registry
  // that creates the store and outlive it.
  KeyStore(absl::Mutex* mu, Connection* db);

  KeyStore(const KeyStore&) = delete;
  KeyStore& operator=(const KeyStore&) = delete;

  absl::Status CreateKey(const ApiKeyRecord& key);
  // Every key, oldest first. No error channel, like the registry's List*
  // calls: a failed read logs and returns what was read.
  std::vector<ApiKeyRecord> ListKeys() const;
  absl::Status DeleteKey(absl::string_view id);
  // Deletes every key of `app` (the app itself was deleted); returns how many.
  absl::StatusOr<int> DeleteAppKeys(absl::string_view app);

 private:
  absl::Mutex* const mu_;
  Connection* const db_;
};

}  // namespace maitre::registry
