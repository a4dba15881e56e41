#include "controller/access/auth_mode.h"

#include "gtest/gtest.h"

namespace maitre::controller {
namespace {

TEST(AuthModeTest, LoopbackAddresses) {
  for (const char* a : {"127.0.0.1:8000", "127.1.2.3:0", "localhost:8000", "[::1]:8001", "::1",
                        "127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:8000", ":8000", "[::]:8000", "10.0.0.5:8000", "example.com:80",
                        "128.0.0.1:1", "[::ffff:10.0.0.1]:80", ""}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(AuthModeTest, AutoRequiresKeysOnceAnyAddressIsExposed) {
  EXPECT_FALSE(*KeysRequired("auto", {"127.0.0.1:8000", "127.0.0.1:8001"}));
  EXPECT_TRUE(*KeysRequired("auto", {"127.0.0.1:8000", "0.0.0.0:8001"}));
  EXPECT_TRUE(*KeysRequired("on", {"127.0.0.1:8000"}));
  EXPECT_FALSE(*KeysRequired("off", {"127.0.0.1:8000"}));
}

TEST(AuthModeTest, OffOnAnExposedAddressAndUnknownModesAreRefused) {
  auto off = KeysRequired("off", {"127.0.0.1:8000", "0.0.0.0:8001"});
  EXPECT_TRUE(absl::IsInvalidArgument(off.status()));
  EXPECT_NE(off.status().message().find("0.0.0.0:8001"), absl::string_view::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(KeysRequired("sometimes", {}).status()));
}

}  // namespace
}  // namespace maitre::controller
