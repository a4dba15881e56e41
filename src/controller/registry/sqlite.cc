#include "controller/registry/sqlite.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace maitre::registry {
namespace {

// How long a writer waits for another process holding the file's write lock.
// Registry writes are short, so a few seconds only expire on a wedged peer.
constexpr int kBusyTimeoutMs = 5000;

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return absl::StatusCode::kDataLoss;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

// ---- Statement ----

Statement::Statement(Connection* connection, sqlite3_stmt* stmt, bool cached)
    : connection_(connection), stmt_(stmt), cached_(cached) {}

Statement::Statement(Statement&& other) noexcept
    : connection_(other.connection_),
      stmt_(other.stmt_),
      cached_(other.cached_),
      next_index_(other.next_index_),
      bind_status_(std::move(other.bind_status_)) {
  other.stmt_ = nullptr;
}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (cached_) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    connection_->Return(stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
}

void Statement::NoteBind(int rc) {
  if (rc != SQLITE_OK && bind_status_.ok()) {
    bind_status_ = connection_->Error(rc, absl::StrCat("binding parameter ", next_index_));
  }
  ++next_index_;
}

Statement& Statement::BindText(absl::string_view value) {
  // SQLITE_TRANSIENT makes SQLite copy the bytes, so `value` may die first.
  NoteBind(sqlite3_bind_text64(stmt_, next_index_, value.data(), value.size(), SQLITE_TRANSIENT,
                               SQLITE_UTF8));
  return *this;
}

Statement& Statement::BindInt(int64_t value) {
  NoteBind(sqlite3_bind_int64(stmt_, next_index_, value));
  return *this;
}

Statement& Statement::BindDouble(double value) {
  NoteBind(sqlite3_bind_double(stmt_, next_index_, value));
  return *this;
}

Statement& Statement::BindOptionalDouble(const std::optional<double>& value) {
  NoteBind(value ? sqlite3_bind_double(stmt_, next_index_, *value)
                 : sqlite3_bind_null(stmt_, next_index_));
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  MAITRE_RETURN_IF_ERROR(bind_status_);
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return connection_->Error(rc, absl::StrCat("running \"", sqlite3_sql(stmt_), "\""));
}

absl::Status Statement::Run() {
  while (true) {
    MAITRE_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return absl::OkStatus();
  }
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

std::optional<double> Statement::OptionalDouble(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Double(column);
}

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  // Ask for the size after the text: the call above may convert the value.
  int size = sqlite3_column_bytes(stmt_, column);
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(size));
}

// ---- Connection ----

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::Status(CodeFor(rc),
                        absl::StrCat("cannot open the registry database ", path, ": ", message));
  }
  auto connection = std::unique_ptr<Connection>(new Connection(db, path));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);

  // SQLite reads the file lazily, so the first statement is where a file that
  // is not a database shows up (SQLITE_NOTADB).
  // The answer is the mode actually chosen; WAL may be refused on odd
  // filesystems, and the registry still works in the default mode.
  absl::Status first = connection->Exec("PRAGMA journal_mode=WAL");
  if (!first.ok()) {
    return absl::Status(first.code(),
                        absl::StrCat("cannot open the registry database ", path, ": ",
                                     sqlite3_errmsg(db), " (is it a Maitre registry file?)"));
  }
  // FULL: a commit is on disk when it returns. Registry writes are rare
  // control-path events, so the extra fsync is worth not losing one.
  MAITRE_RETURN_IF_ERROR(connection->Exec("PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;"));

  MAITRE_ASSIGN_OR_RETURN(Statement check, connection->Prepare("PRAGMA quick_check"));
  MAITRE_ASSIGN_OR_RETURN(bool check_row, check.Step());
  std::string verdict = check_row ? check.Text(0) : "no answer";
  if (verdict != "ok") {
    return absl::DataLossError(
        absl::StrCat("the registry database ", path, " is corrupt (", verdict, ")"));
  }
  return connection;
}

Connection::~Connection() {
  for (auto& [sql, cached] : cache_) sqlite3_finalize(cached.stmt);
  // sqlite3_close_v2 defers the close until any straggling statement is
  // finalised rather than failing with SQLITE_BUSY.
  sqlite3_close_v2(db_);
}

absl::Status Connection::Exec(const std::string& sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string text = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return absl::Status(CodeFor(rc), absl::StrCat("registry database ", path_, ": ", text));
}

absl::StatusOr<Statement> Connection::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end() && !it->second.borrowed) {
    it->second.borrowed = true;
    return Statement(this, it->second.stmt, /*cached=*/true);
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, absl::StrCat("preparing \"", sql, "\""));
  }
  if (it != cache_.end()) return Statement(this, stmt, /*cached=*/false);
  cache_[sql] = CachedStatement{stmt, /*borrowed=*/true};
  return Statement(this, stmt, /*cached=*/true);
}

void Connection::Return(sqlite3_stmt* stmt) {
  for (auto& [sql, cached] : cache_) {
    if (cached.stmt == stmt) {
      cached.borrowed = false;
      return;
    }
  }
}

int64_t Connection::Changes() const { return sqlite3_changes64(db_); }

absl::Status Connection::Error(int rc, absl::string_view what) const {
  // sqlite3_errmsg describes the most recent failure on this connection,
  // which is the one being reported; fall back to the generic text for rc.
  const char* message = sqlite3_errcode(db_) == rc ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc),
                      absl::StrCat("registry database ", path_, ": ", what, ": ", message));
}

// ---- Transaction ----

absl::StatusOr<Transaction> Transaction::Begin(Connection* connection) {
  MAITRE_RETURN_IF_ERROR(connection->Exec("BEGIN IMMEDIATE"));
  return Transaction(connection);
}

Transaction::~Transaction() {
  // A rollback only fails when there is no transaction left to undo, which is
  // the state we want anyway.
  if (open_) (void)connection_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  absl::Status status = connection_->Exec("COMMIT");
  // After a failed COMMIT the transaction is still open; the destructor rolls
  // it back.
  if (status.ok()) open_ = false;
  return status;
}

}  // namespace maitre::registry
