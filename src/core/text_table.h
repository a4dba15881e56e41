// Aligned text tables for people (docs/api.md, "Command line": tables are
// aligned for people; --json is for scripts).
//
// Thread-safety: a value type; not synchronised.
#pragma once

#include <string>
#include <vector>

namespace maitre {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Columns padded to their widest cell, two spaces apart; numbers (cells
  // that start with a digit, '-' or '.') are right-aligned.
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace maitre
