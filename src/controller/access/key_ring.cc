#include "controller/access/key_ring.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/secret_token.h"
#include "core/sha256.h"
#include "core/status_macros.h"

namespace maitre::controller {
namespace {

constexpr absl::string_view kKeyPrefix = "mk_";
constexpr size_t kIdHexDigits = 16;
constexpr size_t kSecretHexDigits = 64;

constexpr char kHowToAuthenticate[] =
    "send an API key as 'Authorization: Bearer mk_...' (gRPC: 'authorization' metadata); "
    "docs/operations.md, \"API keys\", says how to get one";

struct ParsedKey {
  absl::string_view id;
  absl::string_view secret;
};

bool IsLowerHex(absl::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// "mk_<16 hex>_<64 hex>", or nothing.
std::optional<ParsedKey> ParseKey(absl::string_view key) {
  if (key.size() != kKeyPrefix.size() + kIdHexDigits + 1 + kSecretHexDigits ||
      !absl::StartsWith(key, kKeyPrefix) || key[kKeyPrefix.size() + kIdHexDigits] != '_') {
    return std::nullopt;
  }
  ParsedKey parsed{key.substr(kKeyPrefix.size(), kIdHexDigits),
                   key.substr(kKeyPrefix.size() + kIdHexDigits + 1)};
  if (!IsLowerHex(parsed.id) || !IsLowerHex(parsed.secret)) return std::nullopt;
  return parsed;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::Status CheckAppAccess(const Principal& who, absl::string_view app) {
  if (who.admin || who.app == app) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("API key ", who.key_id, " is app '", who.app,
                                                  "''s key; app '", app,
                                                  "' needs its own key or an admin key"));
}

absl::Status CheckAdminAccess(const Principal& who, absl::string_view what) {
  if (who.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(what, " needs an admin key; API key ",
                                                  who.key_id, " is app '", who.app, "''s key"));
}

KeyRing::KeyRing(Options options) : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  for (registry::ApiKeyRecord& key : options_.store->ListKeys()) {
    std::string id = key.id;
    by_id_.emplace(std::move(id), std::move(key));
  }
}

absl::StatusOr<Principal> KeyRing::Authenticate(absl::string_view authorization) const {
  if (!options_.required) return Principal{"", true, ""};
  if (authorization.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("this server requires an API key: ",
                                                   kHowToAuthenticate));
  }
  std::optional<ParsedKey> key = ParseKey(BearerToken(authorization));
  if (!key) {
    return absl::UnauthenticatedError(absl::StrCat("the credential is not an API key: ",
                                                   kHowToAuthenticate));
  }
  // Hashed before the lookup, so that an unknown id and a wrong secret take
  // the same time.
  const std::string presented_hash = Sha256Hex(key->secret);
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(key->id);
  if (it == by_id_.end() || !TokensMatch(presented_hash, it->second.secret_sha256)) {
    return absl::UnauthenticatedError(
        absl::StrCat("API key ", key->id, " is unknown or revoked"));
  }
  return Principal{it->second.id, it->second.admin, it->second.app};
}

absl::StatusOr<NewApiKey> KeyRing::Create(const Principal& by, absl::string_view app,
                                          absl::string_view name) {
  if (app.empty()) {
    MAITRE_RETURN_IF_ERROR(CheckAdminAccess(by, "making an admin key"));
  } else {
    MAITRE_RETURN_IF_ERROR(CheckAppAccess(by, app));
  }
  NewApiKey made;
  const std::string secret = RandomToken(kSecretHexDigits / 2);
  made.record.id = RandomToken(kIdHexDigits / 2);
  made.record.secret_sha256 = Sha256Hex(secret);
  made.record.admin = app.empty();
  made.record.app = std::string(app);
  made.record.name = std::string(name);
  made.record.created_unix_ms = NowUnixMs();
  made.key = absl::StrCat(kKeyPrefix, made.record.id, "_", secret);
  MAITRE_RETURN_IF_ERROR(options_.store->CreateKey(made.record));
  absl::MutexLock lock(&mu_);
  by_id_[made.record.id] = made.record;
  spdlog::info("API key {} made for {} ({})", made.record.id,
               app.empty() ? std::string("admin") : absl::StrCat("app ", app),
               made.record.name);
  return made;
}

std::vector<registry::ApiKeyRecord> KeyRing::List(const Principal& by) const {
  std::vector<registry::ApiKeyRecord> keys;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [id, key] : by_id_) {
    if (by.admin || (!key.admin && key.app == by.app)) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    return std::tie(a.created_unix_ms, a.id) < std::tie(b.created_unix_ms, b.id);
  });
  return keys;
}

absl::Status KeyRing::Revoke(const Principal& by, absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  // Another app's key is "not found" to an app key: its ids are not its business.
  if (it == by_id_.end() || (!by.admin && (it->second.admin || it->second.app != by.app))) {
    return absl::NotFoundError(absl::StrCat("no API key with id ", id, "; GET /v2/keys lists them"));
  }
  if (it->second.admin) {
    int admins = 0;
    for (const auto& [other_id, key] : by_id_) admins += key.admin ? 1 : 0;
    if (admins == 1) {
      return absl::FailedPreconditionError(
          "this is the last admin key; make another admin key before revoking it");
    }
  }
  MAITRE_RETURN_IF_ERROR(options_.store->DeleteKey(id));
  by_id_.erase(it);
  spdlog::info("API key {} revoked", std::string(id));
  return absl::OkStatus();
}

absl::StatusOr<int> KeyRing::ForgetApp(absl::string_view app) {
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(int revoked, options_.store->DeleteAppKeys(app));
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    it = !it->second.admin && it->second.app == app ? by_id_.erase(it) : std::next(it);
  }
  return revoked;
}

absl::StatusOr<bool> KeyRing::EnsureAdminKey(const std::string& path) {
  if (!options_.required) return false;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [id, key] : by_id_) {
      if (key.admin) return false;
    }
  }
  const Principal bootstrap{"", true, ""};
  MAITRE_ASSIGN_OR_RETURN(NewApiKey made, Create(bootstrap, "", "made at first start"));
  if (absl::Status written = CreateSecretFile(path, made.key); !written.ok()) {
    // Without the file nobody holds the key: take it back.
    absl::MutexLock lock(&mu_);
    (void)options_.store->DeleteKey(made.record.id);
    by_id_.erase(made.record.id);
    return absl::FailedPreconditionError(absl::StrCat(
        "the registry has no admin key and the first one could not be written: ",
        written.message(),
        absl::IsAlreadyExists(written) ? " (an old key file; move it away to make a new key)"
                                       : ""));
  }
  return true;
}

}  // namespace maitre::controller
