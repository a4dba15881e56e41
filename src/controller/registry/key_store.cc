#include "controller/registry/key_store.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "controller/registry/blob_store.h"
#include "controller/registry/sqlite.h"
#include "controller/registry/validation.h"
#include "core/status_macros.h"

namespace maitre::registry {
namespace {

absl::Status ValidateKey(const ApiKeyRecord& k) {
  MAITRE_RETURN_IF_ERROR(ValidateName("key id", k.id));
  // The secret's hash has the shape of a blob hash: 64 lowercase hex digits.
  if (!BlobStore::IsValidHash(k.secret_sha256)) {
    return absl::InvalidArgumentError("a key's secret_sha256 must be 64 lowercase hex digits");
  }
  if (k.admin != k.app.empty()) {
    return absl::InvalidArgumentError(
        "a key is either an admin key (no app) or an app's key (one app)");
  }
  if (!k.admin) MAITRE_RETURN_IF_ERROR(ValidateName("app name", k.app));
  return absl::OkStatus();
}

constexpr char kKeyColumns[] = "id, secret_sha256, scope, app, name, created_unix_ms";

ApiKeyRecord KeyFromRow(const Statement& st) {
  ApiKeyRecord k;
  k.id = st.Text(0);
  k.secret_sha256 = st.Text(1);
  k.admin = st.Text(2) == "admin";
  k.app = st.Text(3);
  k.name = st.Text(4);
  k.created_unix_ms = st.Int(5);
  return k;
}

}  // namespace

KeyStore::KeyStore(absl::Mutex* mu, Connection* db) : mu_(mu), db_(db) {}

absl::Status KeyStore::CreateKey(const ApiKeyRecord& key) {
  MAITRE_RETURN_IF_ERROR(ValidateKey(key));
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_));
  {
    MAITRE_ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT 1 FROM api_keys WHERE id = ?1"));
    MAITRE_ASSIGN_OR_RETURN(bool taken, st.BindText(key.id).Step());
    if (taken) return absl::AlreadyExistsError(absl::StrCat("key id ", key.id, " is taken"));
  }
  MAITRE_ASSIGN_OR_RETURN(
      Statement st, db_->Prepare(absl::StrCat("INSERT INTO api_keys(", kKeyColumns,
                                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)")));
  MAITRE_RETURN_IF_ERROR(st.BindText(key.id)
                             .BindText(key.secret_sha256)
                             .BindText(key.admin ? "admin" : "app")
                             .BindText(key.app)
                             .BindText(key.name)
                             .BindInt(key.created_unix_ms)
                             .Run());
  return tx.Commit();
}

std::vector<ApiKeyRecord> KeyStore::ListKeys() const {
  absl::MutexLock lock(mu_);
  auto st = db_->Prepare(
      absl::StrCat("SELECT ", kKeyColumns, " FROM api_keys ORDER BY created_unix_ms, id"));
  if (!st.ok()) {
    spdlog::error("listing API keys: {}", st.status().ToString());
    return {};
  }
  return ReadAllRows<ApiKeyRecord>(*st, KeyFromRow, "api_keys");
}

absl::Status KeyStore::DeleteKey(absl::string_view id) {
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Statement st, db_->Prepare("DELETE FROM api_keys WHERE id = ?1"));
  MAITRE_RETURN_IF_ERROR(st.BindText(id).Run());
  if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat("no API key with id ", id));
  return absl::OkStatus();
}

absl::StatusOr<int> KeyStore::DeleteAppKeys(absl::string_view app) {
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Statement st,
                          db_->Prepare("DELETE FROM api_keys WHERE scope = 'app' AND app = ?1"));
  MAITRE_RETURN_IF_ERROR(st.BindText(app).Run());
  return static_cast<int>(db_->Changes());
}

}  // namespace maitre::registry
