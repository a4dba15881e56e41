// A content-addressed file store: every file is named by the SHA-256 of its
// bytes, so the same model uploaded twice is stored once, and a name always
// means the same bytes (workers can cache by it). Files live at
// dir/ab/abcdef... — a two-level fan-out keeps directories small.
//
// Hashes come from the outside (HTTP paths, worker fetches), so every entry
// point checks that a hash is exactly 64 lowercase hex digits before it is
// turned into a path; nothing else can reach the filesystem.
//
// Thread-safety: thread-safe, and safe across processes sharing the
// directory. The store keeps no mutable state in memory: writes go to a
// temporary file and are renamed into place, so readers only ever see whole
// files, and two writers of the same bytes produce the same file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace maitre::registry {

class BlobStore {
 public:
  struct Options {
    std::string dir;  // created (with parents) when absent
    // Read() re-hashes what it read and reports DataLoss on a mismatch, so a
    // file damaged on disk is never served to a worker as the model.
    bool verify_reads = true;
  };

  static absl::StatusOr<std::unique_ptr<BlobStore>> Open(Options options);

  // True for exactly 64 lowercase hex digits (what Sha256Hex returns).
  static bool IsValidHash(absl::string_view hash);

  // Stores `bytes` and returns their SHA-256 hex. When a file with that hash
  // and size is already present it is left untouched.
  absl::StatusOr<std::string> Put(absl::string_view bytes);

  // The stored bytes. InvalidArgument for a malformed hash, NotFound for an
  // unknown one, DataLoss when verify_reads finds the file damaged.
  absl::StatusOr<std::string> Read(absl::string_view hash) const;

  // Deletes the stored file (garbage collection of a blob nothing refers to
  // any more). InvalidArgument for a malformed hash; an absent file is OK.
  absl::Status Remove(absl::string_view hash);

  // False for a malformed or unknown hash.
  bool Has(absl::string_view hash) const;

  // The stored file's size in bytes; errors as for Read.
  absl::StatusOr<int64_t> Size(absl::string_view hash) const;

  // Where the file for `hash` lives (whether or not it exists); empty for a
  // malformed hash, so a bad hash can never name a path.
  std::string PathOf(absl::string_view hash) const;

  const std::string& dir() const { return options_.dir; }

 private:
  explicit BlobStore(Options options) : options_(std::move(options)) {}
  absl::Status CheckHash(absl::string_view hash) const;

  const Options options_;
};

}  // namespace maitre::registry
