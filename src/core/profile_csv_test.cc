#include "core/profile_csv.h"

#include <gtest/gtest.h>

namespace maitre {
namespace {

TEST(ProfileCsvTest, RoundTrips) {
  ProfileRecord r{{"cnn", "torch-opt"}, "cpu-1", 0.91,
                  *Profile::Create({{1, 1.5, 2.0}, {8, 4.25, 5.5}}, 120.5, 33.25)};
  std::string csv = WriteProfileCsv({r});
  auto parsed = ParseProfileCsv(csv);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 1u);
  const ProfileRecord& p = (*parsed)[0];
  EXPECT_EQ(p.key.ToString(), "cnn:torch-opt");
  EXPECT_EQ(p.worker_type, "cpu-1");
  EXPECT_DOUBLE_EQ(p.accuracy, 0.91);
  EXPECT_DOUBLE_EQ(p.profile.LatencyAt(8), 4.25);
  EXPECT_DOUBLE_EQ(p.profile.load_ms(), 120.5);
  EXPECT_EQ(WriteProfileCsv(*parsed), csv);
}

TEST(ProfileCsvTest, ErrorsNameTheLine) {
  EXPECT_FALSE(ParseProfileCsv("").ok());
  EXPECT_FALSE(ParseProfileCsv("a,b,c\n").ok());
  auto bad = ParseProfileCsv(std::string(kProfileCsvHeader) + "\ncnn,torch,cpu-1,x,1,1,0,0,0.9\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos);
  auto inverted =
      ParseProfileCsv(std::string(kProfileCsvHeader) + "\ncnn,torch,cpu-1,1,3,1,0,0,0.9\n");
  EXPECT_FALSE(inverted.ok());
}

}  // namespace
}  // namespace maitre
