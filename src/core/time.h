// Time in Maitre is an int64 count of nanoseconds. A time point counts from
// the epoch of the Clock that produced it; durations are plain differences.
// Integer time keeps the simulator's event order exact and reproducible.
#pragma once

#include <cstdint>

namespace maitre {

using Nanos = int64_t;

inline constexpr Nanos kMicrosecond = 1000;
inline constexpr Nanos kMillisecond = 1000 * kMicrosecond;
inline constexpr Nanos kSecond = 1000 * kMillisecond;
inline constexpr Nanos kInfiniteFuture = INT64_MAX / 4;

inline constexpr double ToMillis(Nanos ns) { return static_cast<double>(ns) / kMillisecond; }
inline constexpr double ToMicros(Nanos ns) { return static_cast<double>(ns) / kMicrosecond; }
inline constexpr double ToSeconds(Nanos ns) { return static_cast<double>(ns) / kSecond; }
inline constexpr Nanos FromMillis(double ms) { return static_cast<Nanos>(ms * kMillisecond); }
inline constexpr Nanos FromSeconds(double s) { return static_cast<Nanos>(s * kSecond); }

}  // namespace maitre
