// A table of factories by name: how the seams (allocators, query routers)
// let a new implementation be chosen by a flag or an experiment key without
// touching the code that uses it.
//
// Thread-safety: thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace maitre::control {

template <typename T, typename Options>
class NamedFactories {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<T>>(const Options&)>;

  // `what` names the kind of thing in errors ("allocator").
  explicit NamedFactories(std::string what) : what_(std::move(what)) {}

  // AlreadyExists if `name` is taken.
  absl::Status Add(const std::string& name, Factory factory) {
    absl::MutexLock lock(&mu_);
    if (!factories_.emplace(name, std::move(factory)).second) {
      return absl::AlreadyExistsError(absl::StrCat("a ", what_, " named \"", name, "\" exists"));
    }
    return absl::OkStatus();
  }

  // InvalidArgument, listing the names, for an unknown one.
  absl::Status CheckKnown(const std::string& name) const {
    {
      absl::MutexLock lock(&mu_);
      if (factories_.count(name) > 0) return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown ", what_, " \"", name,
                                                   "\"; known: ", absl::StrJoin(Names(), ", ")));
  }

  // CheckKnown's error for an unknown name.
  absl::StatusOr<std::unique_ptr<T>> Create(const std::string& name,
                                            const Options& options) const {
    if (absl::Status known = CheckKnown(name); !known.ok()) return known;
    Factory factory;
    {
      absl::MutexLock lock(&mu_);
      factory = factories_.at(name);
    }
    return factory(options);
  }

  std::vector<std::string> Names() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, factory] : factories_) names.push_back(name);
    return names;
  }

 private:
  const std::string what_;
  mutable absl::Mutex mu_;
  std::map<std::string, Factory> factories_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::control
