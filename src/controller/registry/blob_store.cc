#include "controller/registry/blob_store.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/sha256.h"
#include "core/status_macros.h"

namespace maitre::registry {
namespace {

constexpr size_t kHashLength = 64;
// Characters of the hash used for the fan-out directory. Two hex digits give
// 256 directories, enough to keep each one small for any realistic zoo.
constexpr size_t kFanOut = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<BlobStore>> BlobStore::Open(Options options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("the blob store needs a directory");
  MAITRE_RETURN_IF_ERROR(MakeDirectories(options.dir));
  return std::unique_ptr<BlobStore>(new BlobStore(std::move(options)));
}

bool BlobStore::IsValidHash(absl::string_view hash) {
  if (hash.size() != kHashLength) return false;
  for (char c : hash) {
    bool digit = c >= '0' && c <= '9';
    bool lower_hex = c >= 'a' && c <= 'f';
    if (!digit && !lower_hex) return false;
  }
  return true;
}

absl::Status BlobStore::CheckHash(absl::string_view hash) const {
  if (IsValidHash(hash)) return absl::OkStatus();
  // Only the length goes into the message: the text may be hostile.
  return absl::InvalidArgumentError(absl::StrCat(
      "a blob hash is 64 lowercase hex digits (SHA-256); got ", hash.size(), " characters"));
}

std::string BlobStore::PathOf(absl::string_view hash) const {
  if (!IsValidHash(hash)) return "";
  return absl::StrCat(options_.dir, "/", hash.substr(0, kFanOut), "/", hash);
}

absl::StatusOr<std::string> BlobStore::Put(absl::string_view bytes) {
  std::string hash = Sha256Hex(bytes);
  std::string path = PathOf(hash);
  std::error_code ec;
  uintmax_t present = std::filesystem::file_size(path, ec);
  // Same name and same size: the same bytes are already here (a different
  // size can only be damage, which the rewrite below repairs).
  if (!ec && present == bytes.size()) return hash;
  MAITRE_RETURN_IF_ERROR(MakeDirectories(absl::StrCat(options_.dir, "/", hash.substr(0, kFanOut))));
  MAITRE_RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  return hash;
}

absl::StatusOr<std::string> BlobStore::Read(absl::string_view hash) const {
  MAITRE_RETURN_IF_ERROR(CheckHash(hash));
  std::string path = PathOf(hash);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat("no blob ", hash, " in ", options_.dir));
  }
  MAITRE_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  if (options_.verify_reads && Sha256Hex(bytes) != hash) {
    return absl::DataLossError(
        absl::StrCat("blob ", path, " is damaged: its bytes no longer hash to its name"));
  }
  return bytes;
}

bool BlobStore::Has(absl::string_view hash) const {
  if (!IsValidHash(hash)) return false;
  std::error_code ec;
  return std::filesystem::is_regular_file(PathOf(hash), ec);
}

absl::StatusOr<int64_t> BlobStore::Size(absl::string_view hash) const {
  MAITRE_RETURN_IF_ERROR(CheckHash(hash));
  std::error_code ec;
  uintmax_t size = std::filesystem::file_size(PathOf(hash), ec);
  if (ec) return absl::NotFoundError(absl::StrCat("no blob ", hash, " in ", options_.dir));
  return static_cast<int64_t>(size);
}

absl::Status BlobStore::Remove(absl::string_view hash) {
  MAITRE_RETURN_IF_ERROR(CheckHash(hash));
  std::error_code ec;
  std::filesystem::remove(PathOf(hash), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("removing blob ", hash, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace maitre::registry
