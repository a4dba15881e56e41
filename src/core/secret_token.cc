#include "core/secret_token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"

namespace maitre {

std::string RandomToken(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(raw);
}

bool TokensMatch(absl::string_view presented, absl::string_view expected) {
  if (expected.empty() || presented.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    difference |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  }
  return difference == 0;
}

std::string BearerValue(absl::string_view token) { return absl::StrCat("Bearer ", token); }

absl::string_view BearerToken(absl::string_view value) {
  constexpr absl::string_view kPrefix = "Bearer ";
  if (!absl::StartsWith(value, kPrefix)) return "";
  return value.substr(kPrefix.size());
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("token file ", path, ": ", std::strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "token file ", path, " may be read by others (mode ", absl::StrCat(st.st_mode & 0777),
        "); make it readable by its owner only (chmod 600)"));
  }
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.size() < 16) {
    return absl::FailedPreconditionError(
        absl::StrCat("token file ", path, " holds fewer than 16 characters"));
  }
  return token;
}

absl::Status CreateSecretFile(const std::string& path, absl::string_view secret) {
  // O_EXCL: of two processes making it at once, one writes.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string message = absl::StrCat("cannot create ", path, ": ", std::strerror(errno));
    return errno == EEXIST ? absl::AlreadyExistsError(message) : absl::InternalError(message);
  }
  const std::string line = absl::StrCat(secret, "\n");
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!written) {
    unlink(path.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadOrCreateTokenFile(const std::string& path) {
  // Of two processes making it at once, one writes and both read.
  if (absl::Status made = CreateSecretFile(path, RandomToken());
      !made.ok() && !absl::IsAlreadyExists(made)) {
    return made;
  }
  return ReadTokenFile(path);
}

}  // namespace maitre
