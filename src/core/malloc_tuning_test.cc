#include "core/malloc_tuning.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace maitre {
namespace {

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// What a forward pass does to the heap: several activations of ~13 MB live
// at once, then all freed. Returns the page faults of the last of `rounds`
// rounds, measured in a child process so that each case starts from a fresh
// heap and the tuning stays out of this process.
long FaultsPerRound(bool tuned) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    if (tuned && !TuneMalloc()) _exit(2);
    constexpr size_t kBytes = 13 << 20;
    long faults = 0;
    for (int round = 0; round < 4; ++round) {
      const long before = MinorFaults();
      std::vector<char*> blocks;
      for (int i = 0; i < 4; ++i) {
        char* block = static_cast<char*>(std::malloc(kBytes));
        std::memset(block, i + round, kBytes);
        blocks.push_back(block);
      }
      for (char* block : blocks) std::free(block);
      faults = MinorFaults() - before;
    }
    (void)!write(pipe_fds[1], &faults, sizeof faults);
    _exit(0);
  }
  close(pipe_fds[1]);
  long faults = -1;
  if (read(pipe_fds[0], &faults, sizeof faults) != sizeof faults) faults = -1;
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return faults;
}

TEST(MallocTuningTest, LargeBuffersAreReusedWithoutFaultingAgain) {
  const long untuned = FaultsPerRound(false);
  const long tuned = FaultsPerRound(true);
  ASSERT_GE(untuned, 0);
  ASSERT_GE(tuned, 0);
  // 52 MB is ~13,000 pages; with the tuning a round reuses what the
  // previous one freed.
  EXPECT_LT(tuned, 500) << "faults per round with the tuning (without: " << untuned << ")";
  // Without it glibc hands the memory back and faults it in again; this is
  // the behaviour the tuning exists for.
  EXPECT_GT(untuned, 5000) << "faults per round without the tuning (with: " << tuned << ")";
}

}  // namespace
}  // namespace maitre
