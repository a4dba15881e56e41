// The two ways of loading a server (`maitre bench`, docs/api.md, "Command
// line"):
//
// - Open loop: send times come from an arrival process and never wait on
//   answers. The calling thread is the scheduler: it sleeps until each
//   arrival's time and hands the request to the transport, which sends it
//   asynchronously, so any number may be in flight. Each request records
//   its scheduled time, the time it actually left the client and the time
//   its answer arrived. Latency is counted from the scheduled time, so a
//   client that falls behind cannot hide the server's slowness
//   ("coordinated omission"); how far behind it fell is reported apart as
//   client lag.
// - Closed loop: N workers, each sending its next request the moment the
//   last one is answered (from the completion callback, so N requests are
//   in flight at all times and no thread is held per worker).
//
// After the load phase, both wait up to drain_timeout for the answers still
// outstanding; requests unanswered by then are left "unfinished".
//
// Thread-safety: RunOpenLoop and RunClosedLoop block the calling thread;
// callbacks land on the transport's threads. A transport serves one run at
// a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/time.h"
#include "loadgen/codec.h"
#include "loadgen/transport.h"
#include "core/arrivals.h"

namespace maitre::loadgen {

struct RequestRecord {
  Nanos scheduled = 0;  // when it was due to leave (clock time)
  Nanos sent = 0;       // when it left the client; 0 if unknown (never answered)
  Nanos done = 0;       // when its answer or failure arrived; 0: unfinished
  bool ok = false;
  int32_t error = -1;   // index into RunResult::error_kinds; -1 when ok or unfinished
  int32_t message = -1;  // index into RunResult::error_messages; -1 when none was kept
  ServerTimings server;
};

// Failure messages often carry figures (the time left, a queue's length), so
// most are distinct; past this many a run keeps only their kinds.
inline constexpr size_t kMaxErrorMessages = 10000;

struct RunResult {
  Nanos start = 0;  // the clock time that arrival times count from
  Nanos end = 0;    // the last answer, or when the drain gave up
  Nanos load_duration = 0;  // how long requests were being started
  std::vector<RequestRecord> records;  // in the order they were started
  std::vector<std::string> error_kinds;
  std::vector<std::string> error_examples;  // the first message seen per kind
  // The distinct failure messages, in the order first seen, up to
  // kMaxErrorMessages (a failure past that keeps none).
  std::vector<std::string> error_messages;
  int64_t max_in_flight = 0;
};

struct Progress {
  Nanos elapsed = 0;
  int64_t started = 0;
  int64_t answered = 0;
  int64_t failed = 0;
  int64_t in_flight = 0;
};

struct DriverOptions {
  // Requests are started during [start, start + duration).
  Nanos duration = 10 * kSecond;
  // After the load phase, how long to wait for outstanding answers.
  Nanos drain_timeout = 30 * kSecond;
  const Clock* clock = nullptr;  // null: SteadyClock
  // Called on the driving thread about every progress_every; may be empty.
  std::function<void(const Progress&)> progress;
  Nanos progress_every = kSecond;
};

// Open loop: one request per arrival of `arrivals` (times relative to the
// start), cycling through the transport's payloads.
RunResult RunOpenLoop(Transport& transport, ArrivalSource& arrivals,
                      const DriverOptions& options);

// Closed loop with `concurrency` workers.
RunResult RunClosedLoop(Transport& transport, int concurrency, const DriverOptions& options);

}  // namespace maitre::loadgen
