// Keeps large buffers in the process's heap instead of handing them back to
// the kernel on every free.
//
// glibc serves an allocation above its mmap threshold (128 KiB at first,
// then raised to the largest block freed) with a fresh mapping, and returns
// free memory at the top of the heap to the kernel beyond its trim
// threshold. A forward pass allocates and frees activations of megabytes
// (the wide CNN at batch 64: ~13 MB per layer), so every batch page-faulted
// its memory in again: measured on a cpu-1 worker, the wide CNN's batch 64
// took 54 ms against 3.6 ms at batch 32, a third of the replica's time in
// the kernel, and 32-image requests were served at 21–35 per second. With the
// thresholds fixed here the same load is served at 154 per second.
//
// The cost: a process keeps the memory of its peak batch rather than
// returning it between batches, which is what its peak-memory profile
// assumes anyway.
//
// Call once at process start, before threads that allocate are started.
#pragma once

namespace maitre {

struct MallocTuning {
  // Blocks up to this size come from the heap (glibc's ceiling is 32 MiB on
  // 64-bit); fixing it also stops glibc from moving it.
  int mmap_threshold_bytes = 32 << 20;
  // Free memory at the top of the heap is returned to the kernel only
  // beyond this.
  int trim_threshold_bytes = 512 << 20;
};

// Applies `tuning` with mallopt. Returns false if glibc refused a setting.
bool TuneMalloc(const MallocTuning& tuning = {});

}  // namespace maitre
