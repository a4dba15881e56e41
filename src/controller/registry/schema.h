// The registry's SQL schema as an ordered list of migrations. A data dir
// written by an older build is brought up to date on open by running the
// migrations it has not seen yet, each in its own transaction together with
// the row that records it in `schema_version`; a data dir written by a newer
// build is refused rather than misread.
//
// To change the schema, append a migration with the next version number.
// Never edit or reorder a migration that has shipped: existing data dirs have
// already run it.
//
// Thread-safety: the list is an immutable static; safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace maitre::registry {

struct Migration {
  int version = 0;          // 1, 2, 3, ... with no gaps
  std::string description;  // one line, recorded in schema_version
  std::string sql;          // one or more DDL/DML statements, no parameters
};

// The migrations this build knows, oldest first.
const std::vector<Migration>& SchemaMigrations();

}  // namespace maitre::registry
