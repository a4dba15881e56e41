// Interference migration (INFaaS §4.3 and §6.3.1; docs/policies.md,
// "Interference migration"): what happens to an instance the state machine
// calls Interfered (instance_state.h). Lowering its capacity only makes the
// model autoscaler pay for more replicas on the same slow worker; INFaaS
// instead moves the model to a less-loaded worker, and starts a new worker
// when every instance on that hardware is Interfered (the cluster
// autoscaler's rule, autoscaling_cluster.h).
//
// Per round, for each instance that has been Interfered for at least
// `migrate_after`, in a model that has not moved for `cooldown`:
//  - kRetire: other workers already serve the same variant Active, with
//    spare capacity (`retire_utilisation` of their capacity, less what they
//    are offered) for all the slow copy is offered: selection sends the
//    queries there already, so the slow copy is only unloaded. Both loads
//    read as the most each copy was offered over `load_window`, so that a
//    lull does not pass for room. A copy that
//    was added for capacity is not given up while the others could not carry
//    its share. Their capacity is what the caller saw them deliver where it
//    saw less than the profile (a worker at its CPU limit carries what it
//    serves), and a copy that was itself Interfered within `spell_gap` does
//    not count: back from it for a moment, it is not Active yet;
//  - kMove: otherwise the least-utilised other worker of the same type that
//    is up, has room for the instance's replicas (cores and memory), holds
//    no Interfered or Overloaded instance of the model, and is utilised
//    below `max_target_utilisation`, gets the replicas; the caller loads
//    them there first and unloads the source only once they serve (make
//    before break, so no query is lost);
//  - nothing when no worker qualifies (reason given in `held`).
// Brief returns to Active do not end a spell (`spell_gap`).
// At most one action per model per round, and at most one move away from a
// worker per `settle`: when two co-located instances slow each other down,
// moving one relieves both, and moving both would only co-locate them again
// elsewhere. While a worker settles, the spells of its instances start over.
//
// Pure: the caller passes the snapshot, `now` and the state the last call
// returned.
//
// Thread-safety: a free function over value types.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"
#include "policy/instance_state.h"

namespace maitre::policy {

struct MigrationInstance {
  std::string model;
  std::string variant;  // within the model
  InstanceState state = InstanceState::kInactive;
  int replicas = 0;  // ready
  int loading = 0;
  double cores_per_replica = 1;
  double memory_mb_per_replica = 0;
  double offered_qps = 0;  // what it was offered in the last report
  // What its replicas deliver at the objective: their profile, or less
  // where the worker was observed to deliver less. 0: unknown.
  double capacity_qps = 0;
};

struct MigrationWorker {
  std::string id;
  std::string type;
  bool starting = false;  // asked for, not serving yet: not a target
  double cpu_utilisation = 0;
  double free_cores = 0;
  double free_memory_mb = 0;  // ignored when memory_limited is false
  bool memory_limited = false;
  std::vector<MigrationInstance> instances;
};

struct MigrationOptions {
  // How long an instance's spell must have lasted before it moves: the
  // state machine already wants two slow reports, and this keeps one slow
  // moment from moving a model at once.
  Nanos migrate_after = 3 * kSecond;
  // A spell ends only once the instance has not been Interfered for this
  // long. An Interfered instance that still gets queries (degraded routing)
  // flips back to Active after a couple of reports that were too lightly
  // loaded to judge, and slow again soon after: on the 2-core VM, every
  // 2.5 s with a co-located spinner; counted from each flip, no spell ever
  // reached `migrate_after`.
  Nanos spell_gap = 10 * kSecond;
  // A model that moved is left alone this long: the target needs time to
  // show whether it is any better.
  Nanos cooldown = 60 * kSecond;
  // After a move away from a worker, its other instances are not judged
  // for this long.
  Nanos settle = 15 * kSecond;
  // The share of the other copies' capacity that kRetire may plan to use.
  double retire_utilisation = 0.8;
  // kRetire weighs the most each copy was offered over this window, not its
  // last report. Judged on the last report, real closed-loop runs retired
  // slow copies in the second between two of their client's bursts, with
  // the copy that stayed already past its capacity at the load before; the
  // model autoscaler placed four of six back one to two seconds later.
  Nanos load_window = 30 * kSecond;
  // A worker at or above this CPU utilisation is no less loaded.
  double max_target_utilisation = 0.8;
};

struct MigrationState {
  // Each (worker, "model:variant") spell: when it was first and last seen
  // Interfered.
  struct Spell {
    Nanos since = 0;
    Nanos last = 0;
  };
  std::map<std::pair<std::string, std::string>, Spell> spells;
  std::map<std::string, Nanos> last_moved;       // by model
  std::map<std::string, Nanos> last_moved_from;  // by source worker
  // Each (worker, "model:variant") copy's offered qps by round, within
  // `load_window`, oldest first.
  std::map<std::pair<std::string, std::string>, std::deque<std::pair<Nanos, double>>> offered;
};

struct MigrationAction {
  enum class Kind { kMove, kRetire };
  Kind kind = Kind::kMove;
  std::string model;
  std::string variant;
  std::string from_worker;
  std::string to_worker;  // kMove: where the replicas load; kRetire: who serves already
  int replicas = 0;       // kMove: to load there; kRetire: to unload here
  std::string reason;
};

struct MigrationDecision {
  std::vector<MigrationAction> actions;
  // Interfered instances due to move that could not, with why (one line
  // each), for logs: by "model:variant on worker".
  std::map<std::string, std::string> held;
  MigrationState state;
};

MigrationDecision DecideMigrations(const std::vector<MigrationWorker>& workers,
                                   const MigrationState& previous, Nanos now,
                                   const MigrationOptions& options = {});

}  // namespace maitre::policy
