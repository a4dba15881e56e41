#include "core/thread_name.h"

#include <gtest/gtest.h>

#include <thread>

namespace maitre {
namespace {

TEST(ThreadNameTest, NamesTheCallingThreadOnlyAndCutsLongNames) {
  const std::string mine = ThisThreadName();
  std::string inside;
  std::thread([&] {
    NameThisThread("a-rather-long-thread-name");
    inside = ThisThreadName();
  }).join();
  EXPECT_EQ(inside, "a-rather-long-t");
  EXPECT_EQ(ThisThreadName(), mine);
}

}  // namespace
}  // namespace maitre
