#include "controller/access/key_ring.h"

#include <sys/stat.h>

#include <memory>
#include <string>

#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"
#include "core/file_util.h"
#include "core/secret_token.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::controller {
namespace {

using registry::test_util::TempDir;
using ::testing::HasSubstr;

const Principal kAdmin{"", true, ""};

class KeyRingTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    ring_.reset();
    registry_.reset();
    auto opened = registry::Registry::Open({tmp_.File("registry.db")});
    ASSERT_TRUE(opened.ok()) << opened.status();
    registry_ = *std::move(opened);
    ring_ = std::make_unique<KeyRing>(KeyRing::Options{&registry_->keys(), true});
  }
  absl::StatusOr<Principal> Present(const std::string& key) {
    return ring_->Authenticate(BearerValue(key));
  }

  TempDir tmp_;
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<KeyRing> ring_;
};

TEST_F(KeyRingTest, AKeyAuthenticatesAsWhatItWasMadeFor) {
  auto app_key = ring_->Create(kAdmin, "fashion", "team");
  ASSERT_TRUE(app_key.ok()) << app_key.status();
  EXPECT_THAT(app_key->key, ::testing::StartsWith("mk_"));
  auto who = Present(app_key->key);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_FALSE(who->admin);
  EXPECT_EQ(who->app, "fashion");
  EXPECT_EQ(who->key_id, app_key->record.id);
  // Survives a restart: the ring reads the store.
  Reopen();
  EXPECT_TRUE(Present(app_key->key).ok());
}

TEST_F(KeyRingTest, MissingMalformedWrongAndRevokedKeysAreUnauthenticated) {
  auto key = ring_->Create(kAdmin, "fashion", "");
  ASSERT_TRUE(key.ok());
  auto missing = ring_->Authenticate("");
  EXPECT_TRUE(absl::IsUnauthenticated(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("Authorization: Bearer"));
  EXPECT_TRUE(absl::IsUnauthenticated(ring_->Authenticate(key->key).status()));  // no "Bearer "
  EXPECT_TRUE(absl::IsUnauthenticated(Present("mk_not_a_key").status()));
  std::string wrong_secret = key->key;
  wrong_secret.back() = wrong_secret.back() == '0' ? '1' : '0';
  EXPECT_TRUE(absl::IsUnauthenticated(Present(wrong_secret).status()));
  ASSERT_TRUE(ring_->Create(kAdmin, "", "second admin").ok());
  ASSERT_TRUE(ring_->Revoke(kAdmin, key->record.id).ok());
  auto revoked = Present(key->key);
  EXPECT_TRUE(absl::IsUnauthenticated(revoked.status()));
  EXPECT_THAT(revoked.status().message(), HasSubstr("unknown or revoked"));
}

TEST_F(KeyRingTest, AnAppKeyManagesOnlyItsOwnAppsKeys) {
  auto fashion = ring_->Create(kAdmin, "fashion", "");
  auto digits = ring_->Create(kAdmin, "digits", "");
  ASSERT_TRUE(fashion.ok() && digits.ok());
  const Principal team = *Present(fashion->key);
  EXPECT_TRUE(ring_->Create(team, "fashion", "ci").ok());
  EXPECT_TRUE(absl::IsPermissionDenied(ring_->Create(team, "digits", "").status()));
  EXPECT_TRUE(absl::IsPermissionDenied(ring_->Create(team, "", "admin please").status()));
  for (const auto& k : ring_->List(team)) EXPECT_EQ(k.app, "fashion");
  EXPECT_EQ(ring_->List(team).size(), 2u);
  EXPECT_EQ(ring_->List(kAdmin).size(), 3u);
  EXPECT_TRUE(absl::IsNotFound(ring_->Revoke(team, digits->record.id)));
  EXPECT_TRUE(Present(digits->key).ok());
}

TEST_F(KeyRingTest, TheLastAdminKeyStays) {
  auto first = ring_->EnsureAdminKey(tmp_.File("admin-key"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  auto again = ring_->EnsureAdminKey(tmp_.File("admin-key"));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);  // one exists: nothing made
  auto written = ReadTokenFile(tmp_.File("admin-key"));  // also checks mode 0600
  ASSERT_TRUE(written.ok()) << written.status();
  auto admin = Present(*written);
  ASSERT_TRUE(admin.ok());
  EXPECT_TRUE(admin->admin);
  EXPECT_TRUE(absl::IsFailedPrecondition(ring_->Revoke(*admin, admin->key_id)));
  ASSERT_TRUE(ring_->Create(*admin, "", "second").ok());
  EXPECT_TRUE(ring_->Revoke(*admin, admin->key_id).ok());
}

TEST_F(KeyRingTest, AForgottenAppsKeysStopWorking) {
  auto fashion = ring_->Create(kAdmin, "fashion", "");
  auto digits = ring_->Create(kAdmin, "digits", "");
  ASSERT_TRUE(fashion.ok() && digits.ok());
  auto forgotten = ring_->ForgetApp("fashion");
  ASSERT_TRUE(forgotten.ok());
  EXPECT_EQ(*forgotten, 1);
  EXPECT_TRUE(absl::IsUnauthenticated(Present(fashion->key).status()));
  EXPECT_TRUE(Present(digits->key).ok());
  Reopen();
  EXPECT_TRUE(absl::IsUnauthenticated(Present(fashion->key).status()));
}

TEST_F(KeyRingTest, WithoutRequiredKeysEveryoneIsTheAnonymousAdmin) {
  KeyRing open_ring({&registry_->keys(), false});
  auto who = open_ring.Authenticate("");
  ASSERT_TRUE(who.ok());
  EXPECT_TRUE(who->admin);
  auto made = open_ring.EnsureAdminKey(tmp_.File("admin-key"));
  ASSERT_TRUE(made.ok());
  EXPECT_FALSE(*made);
}

TEST(AccessChecksTest, AppAndAdminChecksNameTheKeyAndTheApp) {
  const Principal team{"abc", false, "fashion"};
  EXPECT_TRUE(CheckAppAccess(team, "fashion").ok());
  EXPECT_TRUE(CheckAppAccess(kAdmin, "anything").ok());
  absl::Status other = CheckAppAccess(team, "digits");
  EXPECT_TRUE(absl::IsPermissionDenied(other));
  EXPECT_THAT(other.message(), HasSubstr("'digits'"));
  EXPECT_THAT(other.message(), HasSubstr("abc"));
  EXPECT_TRUE(absl::IsPermissionDenied(CheckAdminAccess(team, "metrics")));
  EXPECT_TRUE(CheckAdminAccess(kAdmin, "metrics").ok());
}

}  // namespace
}  // namespace maitre::controller
