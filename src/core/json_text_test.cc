#include "core/json_text.h"

#include <gtest/gtest.h>

namespace maitre {
namespace {

TEST(JsonTextTest, EscapesWhatJsonRequires) {
  std::string out;
  AppendJsonString(&out, std::string("a\"b\\c\nd\x01", 8));
  EXPECT_EQ(out, R"("a\"b\\c\nd\u0001")");
}

}  // namespace
}  // namespace maitre
