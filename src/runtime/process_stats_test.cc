#include "runtime/process_stats.h"

#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace maitre::runtime {
namespace {

TEST(ProcessStatsTest, MemoryReadingsAreConsistent) {
  double rss = ResidentMemoryMb();
  EXPECT_GT(rss, 1);
  EXPECT_GE(PeakResidentMemoryMb(), rss * 0.99);
  // Touching 64 MiB raises the resident size by most of that, and the peak
  // is never below the current size.
  constexpr size_t kBytes = 64 << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);
  double grown = ResidentMemoryMb();
  EXPECT_GE(grown, rss + 32);
  EXPECT_GE(PeakResidentMemoryMb(), grown * 0.99);
  EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(ProcessStatsTest, HeapInUseFollowsAllocationsBothWays) {
  const double before = HeapInUseMb();
  constexpr size_t kBytes = 48 << 20;
  auto block = std::make_unique<char[]>(kBytes);
  EXPECT_NEAR(HeapInUseMb() - before, 48, 1);
  block.reset();
  // Freed memory stops counting, though the allocator may keep it resident.
  EXPECT_NEAR(HeapInUseMb() - before, 0, 1);
  // Many small blocks count too (arena chunks, not only mmapped ones).
  std::vector<std::unique_ptr<char[]>> small;
  for (int i = 0; i < 4096; ++i) small.push_back(std::make_unique<char[]>(4096));
  EXPECT_NEAR(HeapInUseMb() - before, 16, 1);
}

TEST(ProcessStatsTest, CpuTimeGrowsWithWork) {
  double start = ProcessCpuSeconds();
  EXPECT_GT(start, 0);
  volatile double sink = 0;
  while (ProcessCpuSeconds() <= start) {
    for (int i = 0; i < 100000; ++i) sink = sink + i * 0.5;
  }
  EXPECT_GT(ProcessCpuSeconds(), start);
}

// Another thread's work moves the process's clock, not this thread's; this
// thread's clock can be read from elsewhere.
TEST(ProcessStatsTest, AThreadsCpuClockCountsOnlyThatThread) {
  std::function<double()> main_thread = CallingThreadCpuClock();
  const double main_start = main_thread();
  const double process_start = ProcessCpuSeconds();
  double worker_start = 0, worker_end = 0;
  std::thread worker([&] {
    std::function<double()> mine = CallingThreadCpuClock();
    worker_start = mine();
    volatile double sink = 0;
    while (mine() - worker_start < 0.05) {
      for (int i = 0; i < 100000; ++i) sink = sink + i * 0.5;
    }
    worker_end = mine();
  });
  worker.join();
  EXPECT_GE(worker_end - worker_start, 0.05);
  EXPECT_GE(ProcessCpuSeconds() - process_start, 0.05);
  EXPECT_LT(main_thread() - main_start, 0.05);  // it only waited
  EXPECT_GE(CallingThreadCores(), 1);
  EXPECT_LE(CallingThreadCores(), static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace maitre::runtime
