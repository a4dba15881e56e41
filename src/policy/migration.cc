#include "policy/migration.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace maitre::policy {
namespace {

bool Unhealthy(InstanceState s) {
  return s == InstanceState::kInterfered || s == InstanceState::kOverloaded;
}

// The instance of `model` (any variant) on `worker` that is Interfered or
// Overloaded, if any.
bool HoldsUnhealthy(const MigrationWorker& worker, const std::string& model) {
  for (const MigrationInstance& i : worker.instances) {
    if (i.model == model && Unhealthy(i.state)) return true;
  }
  return false;
}

// How the state keys a copy: (worker, "model:variant").
std::pair<std::string, std::string> CopyKey(const std::string& worker,
                                            const MigrationInstance& inst) {
  return {worker, absl::StrCat(inst.model, ":", inst.variant)};
}

// The most the copy of `model:variant` on `worker` was offered over the
// load window (its samples are in `state`).
double PeakOffered(const MigrationState& state, const std::string& worker,
                   const MigrationInstance& inst) {
  double peak = inst.offered_qps;
  auto it = state.offered.find(CopyKey(worker, inst));
  if (it == state.offered.end()) return peak;
  for (const auto& [at, qps] : it->second) peak = std::max(peak, qps);
  return peak;
}

// The first other worker serving `model:variant` Active, if the Active
// copies elsewhere have the spare capacity for what `inst` is offered (each
// load the most of the window). A copy in a spell of its own (Interfered
// within `spell_gap`) is not Active yet, however it reads now: on the real
// server both retires that selection undid within seconds were for copies
// back from Interfered for under a second and, left with the whole load,
// Interfered again within seconds.
// When there is none, `why_not` says what the other copies were, for the
// held line: a retire held for minutes is otherwise impossible to explain.
const MigrationWorker* CarriedElsewhere(const std::vector<MigrationWorker>& workers,
                                        const MigrationWorker& source,
                                        const MigrationInstance& inst,
                                        const MigrationState& state,
                                        const MigrationOptions& options, std::string* why_not) {
  const MigrationWorker* first = nullptr;
  double spare = 0;
  std::vector<std::string> others;
  for (const MigrationWorker& w : workers) {
    if (w.id == source.id || w.starting) continue;
    for (const MigrationInstance& i : w.instances) {
      if (i.model != inst.model || i.variant != inst.variant || i.replicas <= 0) continue;
      if (i.state != InstanceState::kActive) {
        others.push_back(absl::StrCat(w.id, " ", InstanceStateName(i.state)));
        continue;
      }
      if (state.spells.count(CopyKey(w.id, i)) > 0) {
        others.push_back(absl::StrCat(w.id, " active within its own spell"));
        continue;
      }
      if (i.capacity_qps <= 0) {  // unknown capacity: nothing to judge by
        *why_not = absl::StrCat("the copy on ", w.id, " has no capacity figure");
        return nullptr;
      }
      const double offered = PeakOffered(state, w.id, i);
      spare += options.retire_utilisation * i.capacity_qps - offered;
      others.push_back(absl::StrFormat("%s active, offered up to %.0f of %.0f qps", w.id,
                                       offered, i.capacity_qps));
      if (first == nullptr) first = &w;
    }
  }
  const double wanted = PeakOffered(state, source.id, inst);
  if (first != nullptr && spare >= wanted) return first;
  *why_not = others.empty()
                 ? std::string("no other copy")
                 : absl::StrFormat("other copies: %s; spare %.0f qps at %.0f%% against its %.0f",
                                   absl::StrJoin(others, ", "), std::max(0.0, spare),
                                   100 * options.retire_utilisation, wanted);
  return nullptr;
}

}  // namespace

MigrationDecision DecideMigrations(const std::vector<MigrationWorker>& workers,
                                   const MigrationState& previous, Nanos now,
                                   const MigrationOptions& options) {
  MigrationDecision decision;
  MigrationState& state = decision.state;
  // Forget moves older than the cooldown and settles that have passed;
  // spells carry over until `spell_gap` after they were last seen, except on
  // a worker that is settling (they start over there).
  for (const auto& [model, at] : previous.last_moved) {
    if (now - at < options.cooldown) state.last_moved[model] = at;
  }
  for (const auto& [worker, at] : previous.last_moved_from) {
    if (now - at < options.settle) state.last_moved_from[worker] = at;
  }
  for (const auto& [where, spell] : previous.spells) {
    if (now - spell.last < options.spell_gap && state.last_moved_from.count(where.first) == 0) {
      state.spells[where] = spell;
    }
  }
  // Each copy's offered load over the window, this round's included; copies
  // gone are forgotten.
  for (const MigrationWorker& w : workers) {
    for (const MigrationInstance& i : w.instances) {
      const auto where = CopyKey(w.id, i);
      auto& samples = state.offered[where];
      if (auto it = previous.offered.find(where); it != previous.offered.end()) {
        for (const auto& sample : it->second) {
          if (now - sample.first < options.load_window) samples.push_back(sample);
        }
      }
      samples.push_back({now, i.offered_qps});
    }
  }
  std::set<std::string> acted;  // models with an action this round
  // Cores and memory already promised to moves this round, by worker.
  std::map<std::string, std::pair<double, double>> promised;
  for (const MigrationWorker& source : workers) {
    if (source.starting || state.last_moved_from.count(source.id) > 0) continue;
    for (const MigrationInstance& inst : source.instances) {
      if (inst.state != InstanceState::kInterfered || inst.replicas <= 0) continue;
      const auto spell_key = CopyKey(source.id, inst);
      auto seen = state.spells.find(spell_key);
      const Nanos since = seen != state.spells.end() ? seen->second.since : now;
      state.spells[spell_key] = {since, now};
      if (now - since < options.migrate_after || inst.loading > 0) continue;
      if (acted.count(inst.model) > 0 || state.last_moved.count(inst.model) > 0) continue;
      const std::string name = spell_key.second;

      std::string no_retire;
      if (const MigrationWorker* serving =
              CarriedElsewhere(workers, source, inst, state, options, &no_retire)) {
        decision.actions.push_back(
            {MigrationAction::Kind::kRetire, inst.model, inst.variant, source.id, serving->id,
             inst.replicas,
             absl::StrFormat("%s on %s has been Interfered for %.1f s and %s serves it Active "
                             "with room for the up to %.0f qps it was offered in %.0f s: unload "
                             "the slow copy",
                             name, source.id, ToSeconds(now - since), serving->id,
                             PeakOffered(state, source.id, inst),
                             ToSeconds(options.load_window))});
        acted.insert(inst.model);
        state.last_moved[inst.model] = now;
        continue;
      }
      const double cores = inst.replicas * inst.cores_per_replica;
      const double memory = inst.replicas * inst.memory_mb_per_replica;
      const MigrationWorker* best = nullptr;
      for (const MigrationWorker& w : workers) {
        if (w.id == source.id || w.starting || w.type != source.type) continue;
        if (w.cpu_utilisation >= options.max_target_utilisation) continue;
        if (HoldsUnhealthy(w, inst.model)) continue;
        const auto& [cores_promised, memory_promised] = promised[w.id];
        if (w.free_cores - cores_promised + 1e-9 < cores) continue;
        if (w.memory_limited && w.free_memory_mb - memory_promised < memory) continue;
        if (best == nullptr || w.cpu_utilisation < best->cpu_utilisation ||
            (w.cpu_utilisation == best->cpu_utilisation && w.id < best->id)) {
          best = &w;
        }
      }
      if (best == nullptr) {
        decision.held[absl::StrCat(name, " on ", source.id)] = absl::StrFormat(
            "%s on %s is Interfered but no other %s worker is up, under %.0f%% CPU and has room "
            "for %d replica(s), and no retire (%s)",
            name, source.id, source.type, 100 * options.max_target_utilisation, inst.replicas,
            no_retire);
        continue;
      }
      promised[best->id].first += cores;
      promised[best->id].second += memory;
      decision.actions.push_back(
          {MigrationAction::Kind::kMove, inst.model, inst.variant, source.id, best->id,
           inst.replicas,
           absl::StrFormat("%s on %s has been Interfered for %.1f s: move %d replica(s) to %s "
                           "(CPU %.0f%% against %.0f%%)",
                           name, source.id, ToSeconds(now - since), inst.replicas, best->id,
                           100 * best->cpu_utilisation, 100 * source.cpu_utilisation)});
      acted.insert(inst.model);
      state.last_moved[inst.model] = now;
      state.last_moved_from[source.id] = now;
      break;  // this worker settles before anything else leaves it
    }
  }
  return decision;
}

}  // namespace maitre::policy
