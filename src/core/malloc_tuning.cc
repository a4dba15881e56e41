#include "core/malloc_tuning.h"

#include <malloc.h>

namespace maitre {

bool TuneMalloc(const MallocTuning& tuning) {
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, tuning.mmap_threshold_bytes) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, tuning.trim_threshold_bytes) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace maitre
