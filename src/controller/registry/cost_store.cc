#include "controller/registry/cost_store.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "controller/registry/sqlite.h"
#include "controller/registry/validation.h"
#include "core/status_macros.h"

namespace maitre::registry {

CostStore::CostStore(absl::Mutex* mu, Connection* db) : mu_(mu), db_(db) {}

absl::Status CostStore::SaveRun(int64_t run_started_unix_ms,
                                const std::vector<CostRunLine>& lines) {
  for (const CostRunLine& line : lines) {
    MAITRE_RETURN_IF_ERROR(ValidateName("worker type", line.type));
    if (!std::isfinite(line.cost) || line.cost < 0 || line.workers < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the cost of ", line.type, " must be finite and not negative, with workers >= 0"));
    }
  }
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_));
  for (const CostRunLine& line : lines) {
    // One statement a line: a statement binds its parameters once.
    MAITRE_ASSIGN_OR_RETURN(
        Statement st,
        db_->Prepare("INSERT INTO cost_runs(run_started_unix_ms, type, market, cost, workers) "
                     "VALUES (?1, ?2, ?3, ?4, ?5) "
                     "ON CONFLICT(run_started_unix_ms, type) DO UPDATE SET "
                     "market = excluded.market, cost = excluded.cost, "
                     "workers = excluded.workers"));
    MAITRE_RETURN_IF_ERROR(st.BindInt(run_started_unix_ms)
                               .BindText(line.type)
                               .BindText(line.market)
                               .BindDouble(line.cost)
                               .BindInt(line.workers)
                               .Run());
  }
  return tx.Commit();
}

CostHistory CostStore::Before(int64_t run_started_unix_ms) const {
  CostHistory history;
  absl::MutexLock lock(mu_);
  auto runs = db_->Prepare(
      "SELECT COUNT(DISTINCT run_started_unix_ms), MIN(run_started_unix_ms) FROM cost_runs "
      "WHERE run_started_unix_ms < ?1");
  auto lines = db_->Prepare(
      "SELECT type, MAX(market), SUM(cost), SUM(workers) FROM cost_runs "
      "WHERE run_started_unix_ms < ?1 GROUP BY type ORDER BY type");
  if (!runs.ok() || !lines.ok()) {
    spdlog::error("reading the cost history: {}",
                  (runs.ok() ? lines.status() : runs.status()).ToString());
    return history;
  }
  auto found = runs->BindInt(run_started_unix_ms).Step();
  if (found.ok() && *found) {
    history.runs = runs->Int(0);
    history.first_run_unix_ms = history.runs > 0 ? runs->Int(1) : 0;
  }
  lines->BindInt(run_started_unix_ms);
  while (true) {
    auto row = lines->Step();
    if (!row.ok()) {
      spdlog::error("reading the cost history: {}", row.status().ToString());
      break;
    }
    if (!*row) break;
    history.lines.push_back({lines->Text(0), lines->Text(1), lines->Double(2), lines->Int(3)});
  }
  return history;
}

}  // namespace maitre::registry
