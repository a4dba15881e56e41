// SHA-256, used to name files in the content-addressed model store.
//
// Thread-safety: a Sha256 object is not synchronised; the free function is.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace maitre {

class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view data);
  // Returns the digest as 64 lowercase hex characters. Call once.
  std::string HexDigest();

 private:
  void Compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string Sha256Hex(absl::string_view data);

}  // namespace maitre
