// What earlier runs of the server paid for workers (docs/api.md,
// "GET /v2/cluster/cost", `history`): the `cost_runs` table of the
// registry's SQLite file (schema migration 10). A run is one start of
// `maitre serve`, named by its start time; the controller saves its cost by
// worker type every minute and when it stops, so a crash loses at most the
// last minute's, and a restart reads back what the runs before it paid.
//
// Errors: InvalidArgument for a malformed line, Unavailable when another
// process holds the file's lock too long.
//
// Thread-safety: thread-safe; shares the registry's connection and mutex,
// as PipelineStore does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace maitre::registry {

class Connection;

// One worker type's cost in one run, or summed over runs.
struct CostRunLine {
  std::string type;
  std::string market;
  double cost = 0;      // dollars
  int64_t workers = 0;  // workers paid for (started) in the run(s)
};

// The runs before a given one, summed by worker type.
struct CostHistory {
  int64_t runs = 0;
  int64_t first_run_unix_ms = 0;  // 0 with no earlier run
  std::vector<CostRunLine> lines;  // by type name
};

class CostStore {
 public:
  // Works on `db` under `mu`, which guards it; both belong to the Registry
  // that creates the store and outlive it.
  CostStore(absl::Mutex* mu, Connection* db);

  CostStore(const CostStore&) = delete;
  CostStore& operator=(const CostStore&) = delete;

  // Replaces the run's lines (those of types not in `lines` stay).
  absl::Status SaveRun(int64_t run_started_unix_ms, const std::vector<CostRunLine>& lines);
  // Every run that started before `run_started_unix_ms`. No error channel,
  // like the registry's List* calls: a failed read logs and returns what
  // was read.
  CostHistory Before(int64_t run_started_unix_ms) const;

 private:
  absl::Mutex* const mu_;
  Connection* const db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::registry
