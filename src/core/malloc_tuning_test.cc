#include "core/malloc_tuning.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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
// at once, then all freed. Returns the page faults of the last of four
// rounds.
long FaultsOfLastRound() {
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
  return faults;
}

constexpr char kProbeEnv[] = "MAITRE_MALLOC_PROBE";

// FaultsOfLastRound in a new process running this binary, so that each case
// starts from glibc's defaults. A forked child would not: it inherits this
// process's heap, whose mmap threshold glibc has already raised if another
// test in the binary freed a large block, and then "untuned" reuses memory
// as well as "tuned" does.
long FaultsPerRound(bool tuned) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  const std::string command = std::string(kProbeEnv) + "=" + (tuned ? "tuned" : "untuned") + " '" +
                              self + "' --gtest_filter=MallocTuningTest.ProbeInAFreshProcess";
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return -1;
  std::string text;
  char buf[4096];
  while (size_t got = fread(buf, 1, sizeof buf, out)) text.append(buf, got);
  if (pclose(out) != 0) return -1;
  const size_t at = text.find("faults=");
  return at == std::string::npos ? -1 : std::strtol(text.c_str() + at + 7, nullptr, 10);
}

// The measuring side of FaultsPerRound; does nothing when run on its own.
TEST(MallocTuningTest, ProbeInAFreshProcess) {
  const char* mode = std::getenv(kProbeEnv);
  if (mode == nullptr) GTEST_SKIP() << "run by FaultsPerRound in a process of its own";
  if (std::string(mode) == "tuned") ASSERT_TRUE(TuneMalloc());
  std::printf("faults=%ld\n", FaultsOfLastRound());
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
