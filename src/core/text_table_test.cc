#include "core/text_table.h"

#include <gtest/gtest.h>

namespace maitre {
namespace {

TEST(TableTest, AlignsColumnsAndRightAlignsNumbers) {
  Table t({"MODEL", "ACC"});
  t.Add({"fmnist-cnn", "0.91"});
  t.Add({"lr", "0.8"});
  EXPECT_EQ(t.Render(),
            "MODEL       ACC\n"
            "fmnist-cnn  0.91\n"
            "lr           0.8\n");
}

}  // namespace
}  // namespace maitre
