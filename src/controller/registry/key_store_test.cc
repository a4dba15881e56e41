// Behaviour of the KeyStore's calls on one registry file, and that keys
// survive reopening it.
#include "controller/registry/key_store.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"
#include "core/sha256.h"
#include "gtest/gtest.h"

namespace maitre::registry {
namespace {


ApiKeyRecord AppKey(const std::string& id, const std::string& app) {
  ApiKeyRecord k;
  k.id = id;
  k.secret_sha256 = Sha256Hex("secret-of-" + id);
  k.app = app;
  k.name = "ci";
  k.created_unix_ms = 1700000000000;
  return k;
}

class KeyStoreTest : public test_util::RegistryFileTest {
 protected:
  KeyStore& keys() { return registry_->keys(); }
};

TEST_F(KeyStoreTest, KeysRoundTripAndSurviveReopening) {
  ApiKeyRecord admin;
  admin.id = "k1";
  admin.secret_sha256 = Sha256Hex("s1");
  admin.admin = true;
  admin.created_unix_ms = 1;
  ASSERT_TRUE(keys().CreateKey(admin).ok());
  ASSERT_TRUE(keys().CreateKey(AppKey("k2", "fashion")).ok());
  Open();
  auto listed = keys().ListKeys();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, "k1");
  EXPECT_TRUE(listed[0].admin);
  EXPECT_EQ(listed[0].app, "");
  EXPECT_EQ(listed[1].id, "k2");
  EXPECT_FALSE(listed[1].admin);
  EXPECT_EQ(listed[1].app, "fashion");
  EXPECT_EQ(listed[1].secret_sha256, Sha256Hex("secret-of-k2"));
  EXPECT_EQ(listed[1].name, "ci");
}

TEST_F(KeyStoreTest, MalformedOrTakenKeysAreRefused) {
  ApiKeyRecord bad_hash = AppKey("k1", "fashion");
  bad_hash.secret_sha256 = "plaintext-secret";
  EXPECT_TRUE(absl::IsInvalidArgument(keys().CreateKey(bad_hash)));
  ApiKeyRecord admin_with_app = AppKey("k1", "fashion");
  admin_with_app.admin = true;
  EXPECT_TRUE(absl::IsInvalidArgument(keys().CreateKey(admin_with_app)));
  EXPECT_TRUE(absl::IsInvalidArgument(keys().CreateKey(AppKey("k1", ""))));
  ASSERT_TRUE(keys().CreateKey(AppKey("k1", "fashion")).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(keys().CreateKey(AppKey("k1", "other"))));
  EXPECT_EQ(keys().ListKeys().size(), 1u);
}

TEST_F(KeyStoreTest, DeletingOneKeyOrAnAppsKeys) {
  ASSERT_TRUE(keys().CreateKey(AppKey("k1", "fashion")).ok());
  ASSERT_TRUE(keys().CreateKey(AppKey("k2", "fashion")).ok());
  ASSERT_TRUE(keys().CreateKey(AppKey("k3", "digits")).ok());
  EXPECT_TRUE(keys().DeleteKey("k1").ok());
  EXPECT_TRUE(absl::IsNotFound(keys().DeleteKey("k1")));
  auto deleted = keys().DeleteAppKeys("fashion");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 1);
  auto left = keys().ListKeys();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].id, "k3");
}

TEST_F(KeyStoreTest, TheFileHoldsNoSecret) {
  ASSERT_TRUE(keys().CreateKey(AppKey("k1", "fashion")).ok());
  registry_.reset();  // flushes the WAL into the file
  std::ifstream in(tmp_.File("registry.db"), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(bytes.str().find("secret-of-k1"), std::string::npos);
  EXPECT_NE(bytes.str().find(Sha256Hex("secret-of-k1")), std::string::npos);
}

}  // namespace
}  // namespace maitre::registry
