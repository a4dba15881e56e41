#include "policy/migration.h"

#include <gtest/gtest.h>

namespace maitre::policy {
namespace {

using Kind = MigrationAction::Kind;

MigrationInstance Inst(const std::string& model, const std::string& variant, InstanceState state,
                       int replicas = 1) {
  MigrationInstance i;
  i.model = model;
  i.variant = variant;
  i.state = state;
  i.replicas = replicas;
  i.cores_per_replica = 1;
  i.memory_mb_per_replica = 100;
  return i;
}

MigrationWorker Worker(const std::string& id, double utilisation, double free_cores,
                       std::vector<MigrationInstance> instances = {}) {
  MigrationWorker w;
  w.id = id;
  w.type = "cpu-2";
  w.cpu_utilisation = utilisation;
  w.free_cores = free_cores;
  w.free_memory_mb = 1000;
  w.memory_limited = true;
  w.instances = std::move(instances);
  return w;
}

// Runs the policy once a second from t = 0 to t = seconds and returns the
// last decision.
MigrationDecision RunFor(const std::vector<MigrationWorker>& workers, int seconds,
                         MigrationState* state, const MigrationOptions& options = {}) {
  MigrationDecision d;
  for (int t = 0; t <= seconds; ++t) {
    d = DecideMigrations(workers, *state, t * kSecond, options);
    *state = d.state;
    if (!d.actions.empty()) return d;
  }
  return d;
}

TEST(MigrationTest, MovesAfterTheSpellToTheLeastUtilisedWorkerWithRoom) {
  const std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered, 2)}),
      Worker("b", 0.5, 2),
      Worker("c", 0.2, 2),
      Worker("d", 0.1, 1),  // the least utilised, but one core for two replicas
  };
  MigrationState state;
  MigrationDecision first = DecideMigrations(workers, state, 0, {});
  EXPECT_TRUE(first.actions.empty());  // the spell has only begun
  state = first.state;
  MigrationDecision early = DecideMigrations(workers, state, 2 * kSecond, {});
  EXPECT_TRUE(early.actions.empty());
  state = early.state;
  MigrationDecision d = DecideMigrations(workers, state, 3 * kSecond, {});
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, Kind::kMove);
  EXPECT_EQ(d.actions[0].from_worker, "a");
  EXPECT_EQ(d.actions[0].to_worker, "c");
  EXPECT_EQ(d.actions[0].replicas, 2);
  EXPECT_NE(d.actions[0].reason.find("Interfered for 3.0 s"), std::string::npos)
      << d.actions[0].reason;
}

TEST(MigrationTest, BriefReturnsToActiveDoNotEndASpellButALongOneDoes) {
  std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}), Worker("b", 0.1, 2)};
  MigrationOptions options;
  options.migrate_after = 5 * kSecond;
  options.spell_gap = 10 * kSecond;
  auto round = [&](MigrationState* state, int second, InstanceState s) {
    workers[0].instances[0].state = s;
    MigrationDecision d = DecideMigrations(workers, *state, second * kSecond, options);
    *state = d.state;
    return d.actions.size();
  };
  // Interfered, Active, Interfered, ... as a state machine flips under
  // degraded routing: the spell runs from the first second.
  MigrationState state;
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(round(&state, t, t % 2 == 0 ? InstanceState::kInterfered : InstanceState::kActive),
              0u);
  }
  EXPECT_EQ(round(&state, 5, InstanceState::kActive), 0u);  // Active now: nothing moves
  EXPECT_EQ(round(&state, 6, InstanceState::kInterfered), 1u);

  // Active for longer than the gap: the next spell starts afresh.
  MigrationState fresh;
  EXPECT_EQ(round(&fresh, 0, InstanceState::kInterfered), 0u);
  for (int t = 1; t <= 10; ++t) round(&fresh, t, InstanceState::kActive);
  EXPECT_TRUE(fresh.spells.empty());
  EXPECT_EQ(round(&fresh, 11, InstanceState::kInterfered), 0u);
  EXPECT_EQ(round(&fresh, 15, InstanceState::kInterfered), 0u);
  EXPECT_EQ(round(&fresh, 16, InstanceState::kInterfered), 1u);
}

TEST(MigrationTest, RetiresTheSlowCopyWhenActiveCopiesElsewhereCanCarryItsLoad) {
  std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}),
      Worker("b", 0.6, 0, {Inst("m", "v", InstanceState::kActive)}),
      Worker("c", 0.0, 4),
  };
  workers[0].instances[0].offered_qps = 50;
  workers[1].instances[0].offered_qps = 100;
  workers[1].instances[0].capacity_qps = 200;  // 0.8 × 200 − 100 = 60 spare ≥ 50
  MigrationState state;
  MigrationDecision d = RunFor(workers, 10, &state);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, Kind::kRetire);
  EXPECT_EQ(d.actions[0].from_worker, "a");
  EXPECT_EQ(d.actions[0].to_worker, "b");

  // The copy on a holds capacity b cannot replace: it moves to c instead.
  workers[0].instances[0].offered_qps = 70;
  state = {};
  d = RunFor(workers, 10, &state);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, Kind::kMove);
  EXPECT_EQ(d.actions[0].to_worker, "c");
  // With c gone it is held, and the line says why no retire either: a hold
  // of minutes (seen on the real server) is otherwise a mystery in the log.
  workers.pop_back();
  state = {};
  d = RunFor(workers, 10, &state);
  EXPECT_TRUE(d.actions.empty());
  ASSERT_EQ(d.held.size(), 1u);
  EXPECT_NE(d.held["m:v on a"].find("no retire (other copies: b active, offered up to 100 of "
                                    "200 qps; spare 60 qps at 80% against its 70)"),
            std::string::npos)
      << d.held["m:v on a"];
  workers[1].instances[0].state = InstanceState::kInterfered;
  state = {};
  d = RunFor(workers, 10, &state);
  EXPECT_NE(d.held["m:v on a"].find("no retire (other copies: b interfered; spare 0 qps"),
            std::string::npos)
      << d.held["m:v on a"];
  workers[1].instances[0].state = InstanceState::kActive;
  workers.push_back(Worker("c", 0.0, 4));
  // ... and with b's capacity unknown nothing is retired either.
  workers[0].instances[0].offered_qps = 1;
  workers[1].instances[0].capacity_qps = 0;
  state = {};
  d = RunFor(workers, 10, &state);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, Kind::kMove);
}

TEST(MigrationTest, ALullDoesNotPassForRoom) {
  // A closed-loop client's bursts with a second's pause between them: b,
  // the copy that stays, is offered 180 of its 200 qps while a burst runs,
  // more than 80% of it, and nothing in the pause; a's slow copy, which
  // selection avoids, is offered nothing. Judged on the last report, the
  // pause at t = 5 s read as room and a was retired (the model autoscaler
  // loaded it back a second later on the real server). Judged on the most
  // of the window, a stays until the bursts have been gone for the whole
  // window.
  std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}),
      Worker("b", 0.9, 0, {Inst("m", "v", InstanceState::kActive)}),
  };
  workers[1].instances[0].capacity_qps = 200;
  MigrationOptions options;
  options.load_window = 10 * kSecond;
  MigrationState state;
  int retired_at = -1;
  for (int t = 0; t <= 30 && retired_at < 0; ++t) {
    const bool burst = t < 12 && t % 5 != 0;  // bursts until 12 s, paused at 5 and 10 s
    workers[1].instances[0].offered_qps = burst ? 180 : 0;
    MigrationDecision d = DecideMigrations(workers, state, t * kSecond, options);
    state = d.state;
    for (const MigrationAction& a : d.actions) {
      ASSERT_EQ(a.kind, Kind::kRetire);
      EXPECT_NE(a.reason.find("with room for the up to 0 qps it was offered in 10 s"),
                std::string::npos)
          << a.reason;
      retired_at = t;
    }
    if (t == 5 || t == 10) {
      EXPECT_NE(d.held["m:v on a"].find("offered up to 180 of 200 qps"), std::string::npos)
          << t << ": " << d.held["m:v on a"];
    }
  }
  // The last burst was at 11 s; the window forgets it at 21 s.
  EXPECT_EQ(retired_at, 21);
}

TEST(MigrationTest, ACopyBackFromInterferedWithinTheGapDoesNotCarryTheSlowOne) {
  // b was Interfered too until t = 1 s; Active since, with room by its
  // capacity. On the real server such a copy, left with the whole load, was
  // Interfered again within seconds and selection loaded the retired copy
  // back. Only once b's spell has ended (10 s after it was last Interfered)
  // does it carry a's share.
  std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}),
      Worker("b", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}),
  };
  workers[0].instances[0].offered_qps = 50;
  workers[1].instances[0].offered_qps = 100;
  workers[1].instances[0].capacity_qps = 200;
  MigrationState state;
  int retired_at = -1;
  for (int t = 0; t <= 15 && retired_at < 0; ++t) {
    if (t == 2) workers[1].instances[0].state = InstanceState::kActive;
    MigrationDecision d = DecideMigrations(workers, state, t * kSecond, {});
    state = d.state;
    for (const MigrationAction& a : d.actions) {
      ASSERT_EQ(a.kind, Kind::kRetire);
      EXPECT_EQ(a.from_worker, "a");
      retired_at = t;
    }
  }
  EXPECT_EQ(retired_at, 11);
}

TEST(MigrationTest, SkipsTargetsThatAreUnhealthyForTheModelBusyStartingOrOfAnotherType) {
  MigrationWorker other_type = Worker("e", 0.0, 4);
  other_type.type = "gpu";
  MigrationWorker starting = Worker("f", 0.0, 4);
  starting.starting = true;
  const std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}),
      Worker("b", 0.1, 2, {Inst("m", "w", InstanceState::kOverloaded)}),
      Worker("c", 0.85, 2),
      Worker("d", 0.1, 0.5),
      other_type,
      starting,
  };
  MigrationState state;
  MigrationDecision d = RunFor(workers, 10, &state);
  EXPECT_TRUE(d.actions.empty());
  ASSERT_EQ(d.held.size(), 1u);
  EXPECT_NE(d.held.begin()->second.find("m:v on a is Interfered"), std::string::npos) << d.held.begin()->second;
}

TEST(MigrationTest, RespectsMemoryWhenLimited) {
  MigrationWorker small = Worker("b", 0.1, 2);
  small.free_memory_mb = 50;
  std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}), small};
  MigrationState state;
  EXPECT_TRUE(RunFor(workers, 10, &state).actions.empty());
  workers[1].memory_limited = false;
  state = {};
  EXPECT_EQ(RunFor(workers, 10, &state).actions.size(), 1u);
}

TEST(MigrationTest, AModelMovesAtMostOncePerCooldown) {
  const std::vector<MigrationWorker> workers = {
      Worker("a1", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}),
      Worker("a2", 0.9, 0, {Inst("m", "w", InstanceState::kInterfered)}),
      Worker("b", 0.1, 4),
  };
  MigrationOptions options;
  options.cooldown = 20 * kSecond;
  MigrationState state;
  MigrationDecision d = RunFor(workers, 10, &state, options);
  ASSERT_EQ(d.actions.size(), 1u);  // one of the model's two instances, not both in one round
  EXPECT_EQ(d.actions[0].from_worker, "a1");
  const Nanos moved_at = state.last_moved.at("m");
  for (Nanos t = moved_at + kSecond; t < moved_at + 20 * kSecond; t += kSecond) {
    d = DecideMigrations(workers, state, t, options);
    state = d.state;
    EXPECT_TRUE(d.actions.empty()) << ToSeconds(t - moved_at);
  }
  EXPECT_EQ(DecideMigrations(workers, state, moved_at + 20 * kSecond, options).actions.size(), 1u);
}

TEST(MigrationTest, TwoMovesInOneRoundDoNotOverfillOneTarget) {
  const std::vector<MigrationWorker> workers = {
      Worker("a1", 0.9, 0, {Inst("m", "v", InstanceState::kInterfered)}),
      Worker("a2", 0.9, 0, {Inst("n", "v", InstanceState::kInterfered)}),
      Worker("b", 0.1, 1),
      Worker("c", 0.3, 1),
  };
  MigrationState state;
  MigrationDecision d = RunFor(workers, 10, &state);
  ASSERT_EQ(d.actions.size(), 2u);
  EXPECT_EQ(d.actions[0].to_worker, "b");
  EXPECT_EQ(d.actions[1].to_worker, "c");
}

TEST(MigrationTest, OneInstanceLeavesAWorkerThenItSettlesAndSpellsStartOver) {
  // Two co-located models slow each other down: moving one relieves both.
  const std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0,
             {Inst("m", "v", InstanceState::kInterfered), Inst("n", "v", InstanceState::kInterfered)}),
      Worker("b", 0.1, 4),
  };
  MigrationOptions options;
  options.settle = 10 * kSecond;
  MigrationState state;
  MigrationDecision d = RunFor(workers, 10, &state, options);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].model, "m");
  const Nanos moved_at = state.last_moved_from.at("a");
  // Still Interfered (say, no query has probed it yet): n waits out the
  // settle, then a whole new spell.
  for (Nanos t = moved_at + kSecond; t < moved_at + 13 * kSecond; t += kSecond) {
    d = DecideMigrations(workers, state, t, options);
    state = d.state;
    EXPECT_TRUE(d.actions.empty()) << ToSeconds(t - moved_at);
  }
  d = DecideMigrations(workers, state, moved_at + 13 * kSecond, options);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].model, "n");
}

TEST(MigrationTest, LeavesLoadingAndHealthyInstancesAlone) {
  MigrationInstance loading = Inst("m", "v", InstanceState::kInterfered);
  loading.loading = 1;
  const std::vector<MigrationWorker> workers = {
      Worker("a", 0.9, 0, {loading, Inst("n", "v", InstanceState::kActive),
                           Inst("o", "v", InstanceState::kOverloaded)}),
      Worker("b", 0.1, 4),
  };
  MigrationState state;
  EXPECT_TRUE(RunFor(workers, 10, &state).actions.empty());
}

}  // namespace
}  // namespace maitre::policy
