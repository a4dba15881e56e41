// Sheds queries that waited too long in the HTTP front-end's own backlog,
// before their bodies are decoded (docs/architecture.md, "Admission and
// overload").
//
// Why: when the front-end's I/O thread is the bottleneck, a request waits
// from the moment its first bytes reach its socket (its arrival stamp, the
// kernel's) until its handler runs, behind every other connection's
// events. Admission sees
// that wait only after the body is decoded, the most expensive step, and by
// then the query's deadline has often passed: refusals cost nearly as much
// as answers, and the backlog keeps growing. This detector tells a standing
// backlog from a passing burst the way CoDel does (Nichols and Jacobson,
// "Controlling Queue Delay", ACM Queue 2012): it watches the smallest wait
// in each interval. Only when even the smallest wait of a whole interval
// was above the target is there a standing queue; while there is, a query
// whose own wait is above the target is refused before decoding, which
// costs a fraction of decoding it. A burst that drains within an interval
// sheds nothing. Once shedding, the smallest wait is short because of the
// shedding itself, so shedding ends only after an interval in which no
// query waited past the target: ending it at the first short wait let the
// backlog build again for a whole interval or more, over and over, and
// under overload the queries decoded meanwhile had mostly missed their
// deadlines already (docs/experiments.md, "Overload").
//
// Thread-safety: thread-safe (one mutex; the front-end calls it once per
// query).
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"

namespace maitre::controller {

class BacklogShedder {
 public:
  struct Options {
    // The wait a query may have in the front-end's backlog once a standing
    // queue is found. 0 turns shedding off.
    Nanos target = 5'000'000;
    // How long the smallest wait must stay above `target` to count as a
    // standing queue, and how often that is judged again.
    Nanos interval = 100'000'000;
  };

  explicit BacklogShedder(Options options) : options_(options) {}

  // Records a query that waited `waited` in the backlog (its handler runs at
  // `now`), and returns whether to refuse it.
  bool ShouldShed(Nanos waited, Nanos now);

  // Whether queries are being shed at `now`: as the last interval judged
  // found, unless a whole interval has passed since without a query.
  bool standing(Nanos now) const;

  const Options& options() const { return options_; }

 private:
  const Options options_;
  mutable absl::Mutex mu_;
  Nanos interval_end_ ABSL_GUARDED_BY(mu_) = 0;
  bool interval_seen_ ABSL_GUARDED_BY(mu_) = false;
  Nanos interval_min_ ABSL_GUARDED_BY(mu_) = 0;
  Nanos interval_max_ ABSL_GUARDED_BY(mu_) = 0;
  bool standing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace maitre::controller
