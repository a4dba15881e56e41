// A thin layer over one SQLite connection, private to the registry: cached
// prepared statements with positional binding, transactions that roll back
// unless committed, and SQLite result codes turned into absl::Status with the
// database path in the message.
//
// Values only ever reach SQL through bind parameters; nothing here splices a
// caller's string into SQL text.
//
// Thread-safety: NOT thread-safe. A Connection and every Statement borrowed
// from it must be used by one thread at a time; the Registry and its
// JobStore serialise all use behind the registry's mutex (the connection is
// opened with SQLITE_OPEN_NOMUTEX for that reason).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/logging.h"

struct sqlite3;
struct sqlite3_stmt;

namespace maitre::registry {

class Connection;

// A prepared statement borrowed from a Connection. Parameters are bound in
// order (Bind* calls fill ?1, ?2, ...). On destruction the statement is reset
// and returned to the connection's cache. A bind error is remembered and
// reported by the next Step/Run, so call sites can bind without checking
// each call.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  Statement& BindText(absl::string_view value);
  Statement& BindInt(int64_t value);
  Statement& BindDouble(double value);
  Statement& BindOptionalDouble(const std::optional<double>& value);  // unset -> NULL

  // Advances one row: true when a row is ready to read, false when done.
  absl::StatusOr<bool> Step();
  // Steps to completion; for statements that return no rows.
  absl::Status Run();

  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Double(int column) const;
  std::optional<double> OptionalDouble(int column) const;  // NULL -> unset
  std::string Text(int column) const;

 private:
  friend class Connection;
  Statement(Connection* connection, sqlite3_stmt* stmt, bool cached);
  void NoteBind(int rc);

  Connection* connection_;
  sqlite3_stmt* stmt_;
  bool cached_;  // false: a one-off statement, finalised on destruction
  int next_index_ = 1;
  absl::Status bind_status_;
};

class Connection {
 public:
  // Opens (creating when absent) the database file at `path` and applies the
  // connection settings every registry needs: extended result codes, a busy
  // timeout, WAL journaling, foreign keys and full synchronous commits. A file
  // that is not a SQLite database, or fails SQLite's quick check, is refused
  // with DataLoss.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const std::string& path);
  ~Connection();

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs a script of one or more statements that take no parameters (schema
  // DDL, pragmas, BEGIN/COMMIT). Never pass caller-supplied text here.
  absl::Status Exec(const std::string& sql);

  // Prepares `sql` once and reuses it afterwards. If the cached statement is
  // already borrowed (a nested use of the same SQL) a one-off copy is
  // prepared instead, so nesting is safe.
  absl::StatusOr<Statement> Prepare(const std::string& sql);

  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t Changes() const;

  // An absl::Status for SQLite result code `rc`, naming `what` was being
  // done, the path and SQLite's own message.
  absl::Status Error(int rc, absl::string_view what) const;

  const std::string& path() const { return path_; }

 private:
  friend class Statement;
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  void Return(sqlite3_stmt* stmt);

  sqlite3* db_;
  std::string path_;
  struct CachedStatement {
    sqlite3_stmt* stmt = nullptr;
    bool borrowed = false;
  };
  std::map<std::string, CachedStatement> cache_;
};

// BEGIN IMMEDIATE on construction through Begin; ROLLBACK on destruction
// unless Commit succeeded. IMMEDIATE takes the write lock up front, so two
// processes sharing the file queue on the busy timeout instead of failing
// half way through with SQLITE_BUSY on lock upgrade.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Connection* connection);
  Transaction(Transaction&& other) noexcept : connection_(other.connection_), open_(other.open_) {
    other.open_ = false;
  }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  absl::Status Commit();

 private:
  explicit Transaction(Connection* connection) : connection_(connection), open_(true) {}

  Connection* connection_;
  bool open_;
};

// Reads every row of `st` through `decode` (returning T or StatusOr<T>).
// Rows that fail to decode are logged and skipped; a failing step is logged
// and ends the list. This is how the stores' List* calls, which have no
// error channel, read (see the note on List* in registry.h).
template <typename T, typename Decode>
std::vector<T> ReadAllRows(Statement& st, Decode decode, const char* what) {
  std::vector<T> out;
  while (true) {
    absl::StatusOr<bool> row = st.Step();
    if (!row.ok()) {
      spdlog::error("listing {}: {}", what, row.status().ToString());
      break;
    }
    if (!*row) break;
    absl::StatusOr<T> item = decode(st);
    if (!item.ok()) {
      spdlog::error("listing {}: skipping a row: {}", what, item.status().ToString());
      continue;
    }
    out.push_back(*std::move(item));
  }
  return out;
}

}  // namespace maitre::registry
