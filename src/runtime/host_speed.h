// Whether the host runs at its usual speed right now. On a shared (virtual)
// machine the cores slow down for seconds at a time: a neighbour busy on the
// same physical core, or the hypervisor. Measured here, a fixed compute loop
// took 1.5x its usual time for ~10 s stretches on one core. A profile
// measured in such a stretch is that much too slow, and its rounds (a second
// or two apart) cannot see through it; the profiler times this reference
// kernel before and after measuring and measures again a little later when
// the kernel ran slow (MeasureOptions::host_slowdown; the worker wires it).
//
// "Slow" is relative to the fastest time seen. A worker that starts inside a
// slow stretch would take the stretch for the usual speed (a whole re-profile
// of the zoo came out 1.4x slow that way, with no retry), so the fastest time
// can be kept in a file that outlives the process: each worker type's
// workers on a host share one (`maitre worker --host-speed-file`).
//
// Thread-safety: not thread-safe; one probe per measuring thread.
#pragma once

#include <string>

#include "core/clock.h"

namespace maitre::runtime {

class HostSpeedProbe {
 public:
  // `baseline_file` (optional) holds the fastest time seen, in ms, read at
  // construction and rewritten whenever a faster one is measured. A missing
  // or unreadable file starts from nothing; one that cannot be written
  // leaves the baseline to this process.
  explicit HostSpeedProbe(const Clock* clock, std::string baseline_file = "");

  // Times the reference kernel (the best of a few runs, in ms) on the
  // calling thread, and remembers the fastest time seen so far.
  double Measure();
  // How much slower `ms` is than the fastest time seen (1 = as fast; 1 when
  // nothing was measured yet).
  double Slowdown(double ms) const;

 private:
  const Clock* clock_;
  const std::string baseline_file_;
  double fastest_ms_ = 0;
};

}  // namespace maitre::runtime
