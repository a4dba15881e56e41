#include "core/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace maitre {
namespace {

// The Landlock ABI, spelled out here rather than taken from
// <linux/landlock.h>: Debian 12's headers predate the network rules and
// scopes that newer kernels offer, and the kernel accepts a larger struct
// whose unknown fields are zero.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};
struct NetPortAttr {
  uint64_t allowed_access;
  uint64_t port;
};
constexpr int kRulePathBeneath = 1;
constexpr int kRuleNetPort = 2;
constexpr uint32_t kCreateRulesetVersion = 1;

constexpr uint64_t kFsExecute = 1 << 0;
constexpr uint64_t kFsWriteFile = 1 << 1;
constexpr uint64_t kFsReadFile = 1 << 2;
constexpr uint64_t kFsReadDir = 1 << 3;
constexpr uint64_t kFsRemoveDir = 1 << 4;
constexpr uint64_t kFsRemoveFile = 1 << 5;
constexpr uint64_t kFsMakeChar = 1 << 6;
constexpr uint64_t kFsMakeDir = 1 << 7;
constexpr uint64_t kFsMakeReg = 1 << 8;
constexpr uint64_t kFsMakeSock = 1 << 9;
constexpr uint64_t kFsMakeFifo = 1 << 10;
constexpr uint64_t kFsMakeBlock = 1 << 11;
constexpr uint64_t kFsMakeSym = 1 << 12;
constexpr uint64_t kFsRefer = 1 << 13;     // ABI 2
constexpr uint64_t kFsTruncate = 1 << 14;  // ABI 3
constexpr uint64_t kFsIoctlDev = 1 << 15;  // ABI 5
constexpr uint64_t kNetConnectTcp = 1 << 1;      // ABI 4
constexpr uint64_t kScopeAbstractUnix = 1 << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1 << 1;        // ABI 6

// Rights that make sense on a single file rather than a directory.
constexpr uint64_t kFileRights = kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;

uint64_t FsRightsOf(int abi) {
  uint64_t rights = kFsExecute | kFsWriteFile | kFsReadFile | kFsReadDir | kFsRemoveDir |
                    kFsRemoveFile | kFsMakeChar | kFsMakeDir | kFsMakeReg | kFsMakeSock |
                    kFsMakeFifo | kFsMakeBlock | kFsMakeSym;
  if (abi >= 2) rights |= kFsRefer;
  if (abi >= 3) rights |= kFsTruncate;
  if (abi >= 5) rights |= kFsIoctlDev;
  return rights;
}

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Allows `rights` beneath `path` (masked to file rights for a file). A
// missing path is skipped: /lib64 is absent on some systems.
absl::Status AllowPath(int ruleset, const std::string& path, uint64_t rights, uint64_t handled) {
  Fd fd(open(path.c_str(), O_PATH | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return Errno(absl::StrCat("sandbox: opening ", path));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Errno(absl::StrCat("sandbox: stat ", path));
  PathBeneathAttr rule{};
  rule.allowed_access = rights & handled & (S_ISDIR(st.st_mode) ? ~uint64_t{0} : kFileRights);
  rule.parent_fd = fd.get();
  if (syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0) != 0) {
    return Errno(absl::StrCat("sandbox: a rule for ", path));
  }
  return absl::OkStatus();
}

struct UserIds {
  uid_t uid;
  gid_t gid;
};

absl::StatusOr<UserIds> LookUpUser(const std::string& name) {
  std::vector<char> buffer(16384);
  passwd entry;
  passwd* found = nullptr;
  int rc = getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (rc != 0 || found == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox: no user '", name, "' to run model code as"));
  }
  if (found->pw_uid == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox: user '", name, "' is root; model code needs an unprivileged one"));
  }
  return UserIds{found->pw_uid, found->pw_gid};
}

// Raw system calls: glibc's wrappers change every thread of the process,
// and a multi-threaded caller wants only this one changed.
absl::Status SwitchThreadTo(const UserIds& ids) {
  if (syscall(SYS_setgroups, 0, nullptr) != 0) return Errno("sandbox: setgroups");
  if (syscall(SYS_setresgid, ids.gid, ids.gid, ids.gid) != 0) return Errno("sandbox: setresgid");
  if (syscall(SYS_setresuid, ids.uid, ids.uid, ids.uid) != 0) return Errno("sandbox: setresuid");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SandboxMode> ParseSandboxMode(const std::string& text) {
  if (text == "off") return SandboxMode::kOff;
  if (text == "best-effort") return SandboxMode::kBestEffort;
  if (text == "required") return SandboxMode::kRequired;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sandbox mode '", text, "' (off, best-effort or required)"));
}

const char* SandboxModeName(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::kOff:
      return "off";
    case SandboxMode::kBestEffort:
      return "best-effort";
    case SandboxMode::kRequired:
      return "required";
  }
  return "?";
}

std::vector<std::string> SystemReadPaths() {
  return {"/usr",          "/lib",      "/lib64",        "/etc/ld.so.cache",
          "/dev/null",     "/dev/urandom", "/proc/cpuinfo", "/sys/devices/system/cpu",
          "/sys/devices/system/node"};
}

std::string SandboxReport::Describe() const {
  if (landlock_abi == 0 && user.empty()) return "unconfined";
  std::vector<std::string> parts;
  if (landlock_abi > 0) {
    parts.push_back(absl::StrCat("landlock v", landlock_abi, " (files",
                                 network_rules ? ", tcp connect" : "",
                                 signal_scope ? ", signals" : "", ")"));
  } else {
    parts.push_back("no landlock");
  }
  parts.push_back("no_new_privs");
  if (!user.empty()) parts.push_back(absl::StrCat("user ", user));
  return absl::StrJoin(parts, ", ");
}

int LandlockAbi() {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

absl::StatusOr<SandboxReport> ConfineCallingThread(const SandboxOptions& options) {
  SandboxReport report;
  if (options.mode == SandboxMode::kOff) return report;
  const int abi = LandlockAbi();
  if (abi == 0 && options.mode == SandboxMode::kRequired) {
    return absl::FailedPreconditionError(
        "sandbox: this kernel offers no Landlock (required by --sandbox required)");
  }

  // The rules are built while this thread can still open every path; only
  // then does it give up its user and its rights.
  RulesetAttr attr{};
  attr.handled_access_fs = FsRightsOf(abi);
  if (abi >= 4) attr.handled_access_net = kNetConnectTcp;
  if (abi >= 6) attr.scoped = kScopeAbstractUnix | kScopeSignal;
  Fd ruleset(abi > 0 ? static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0))
                     : -1);
  if (abi > 0) {
    if (ruleset.get() < 0) return Errno("sandbox: landlock_create_ruleset");
    const uint64_t handled = attr.handled_access_fs;
    const uint64_t read = kFsReadFile | kFsReadDir;
    const uint64_t write = FsRightsOf(abi) & ~kFsExecute;
    for (const std::string& p : options.read_paths) {
      if (absl::Status s = AllowPath(ruleset.get(), p, read, handled); !s.ok()) return s;
    }
    for (const std::string& p : options.write_paths) {
      if (absl::Status s = AllowPath(ruleset.get(), p, write, handled); !s.ok()) return s;
    }
    for (const std::string& p : options.exec_paths) {
      if (absl::Status s = AllowPath(ruleset.get(), p, read | kFsExecute, handled); !s.ok()) {
        return s;
      }
    }
    if (abi >= 4) {
      for (int port : options.connect_ports) {
        NetPortAttr rule{kNetConnectTcp, static_cast<uint64_t>(port)};
        if (syscall(SYS_landlock_add_rule, ruleset.get(), kRuleNetPort, &rule, 0) != 0) {
          return Errno(absl::StrCat("sandbox: a rule for port ", port));
        }
      }
      report.network_rules = true;
    }
    report.signal_scope = abi >= 6;
  }

  if (geteuid() == 0 && !options.user.empty()) {
    absl::StatusOr<UserIds> ids = LookUpUser(options.user);
    if (!ids.ok()) return ids.status();
    if (absl::Status s = SwitchThreadTo(*ids); !s.ok()) return s;
    report.user = options.user;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno("sandbox: no_new_privs");
  if (abi > 0) {
    if (syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
      return Errno("sandbox: landlock_restrict_self");
    }
    report.landlock_abi = abi;
  }
  return report;
}

absl::Status HandTreeTo(const std::string& dir, const std::string& user) {
  absl::StatusOr<UserIds> ids = LookUpUser(user);
  if (!ids.ok()) return ids.status();
  auto hand = [&](const std::filesystem::path& p) -> absl::Status {
    if (lchown(p.c_str(), ids->uid, ids->gid) != 0) {
      return Errno(absl::StrCat("sandbox: chown ", p.string()));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = hand(dir); !s.ok()) return s;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    if (absl::Status s = hand(it->path()); !s.ok()) return s;
  }
  if (error) {
    return absl::InternalError(absl::StrCat("sandbox: listing ", dir, ": ", error.message()));
  }
  return absl::OkStatus();
}

int ThreadsInProcess() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int threads = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++threads;
  }
  closedir(dir);
  return threads;
}

}  // namespace maitre
