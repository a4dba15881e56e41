// Groups the queries bound for one instance into worker calls
// (docs/architecture.md, "How a query travels"). Each instance has a few
// call slots: a query that finds one free leaves at once, in a call of its
// own, so a lone query never waits for company; a query that finds them all
// taken waits here, and when one of the instance's calls returns, every query
// that waited (up to a call's limit) leaves together in the next call, which
// takes the returning call's slot. Under load the worker then receives one
// call per batch instead of one per query: one message each way, one
// completion, one wake-up of its queue thread.
//
// Pure bookkeeping: the caller sends the groups it is handed and reports
// each call's return. The clock is the caller's (`now` arguments).
//
// Thread-safety: thread-safe.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/dataplane/worker_api.h"
#include "core/variant.h"

namespace maitre::controller {

// A query on its way to a worker, until its call returns.
struct OutgoingQuery {
  std::shared_ptr<const std::vector<Tensor>> inputs;
  WorkerApi::InferOptions options;
  Nanos offered = 0;   // when it was offered, on the caller's clock
  Nanos deadline = 0;  // when its timeout ends
  WorkerReplyCallback done;
};

class CallCoalescer {
 public:
  struct Options {
    // Calls in flight to one instance: enough that the worker holds the
    // next group while it runs one (a replica's batch, plus one waiting).
    int calls_per_instance = 2;
    // Most queries in one call, so that one call is about one batch: its
    // answer waits for the last of them.
    int max_queries_per_call = 16;
  };
  explicit CallCoalescer(Options options) : options_(options) {}

  // A query for `key`: returned alone, to send now, when a call slot is
  // free; else it waits (an empty result).
  std::vector<OutgoingQuery> Offer(const VariantKey& key, OutgoingQuery query);

  struct Next {
    std::vector<OutgoingQuery> send;     // the next call, in the slot just freed
    std::vector<OutgoingQuery> expired;  // waited past their deadline: answer them
  };
  // One of `key`'s calls returned: the queries that waited for it. When
  // `send` is empty the slot is free again.
  Next CallReturned(const VariantKey& key, Nanos now);

  // Queries waiting for a slot, over all instances (for tests and metrics).
  int Waiting() const;

 private:
  struct Lane {
    int calls = 0;
    std::vector<OutgoingQuery> waiting;  // oldest first
  };
  const Options options_;
  mutable absl::Mutex mu_;
  std::map<VariantKey, Lane> lanes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
