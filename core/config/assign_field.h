// Storing one TOML value into a job field, with the type checks every source
// of values (the job file, a --set override) shares.
#pragma once
#include <toml++/toml.h>

#include <optional>
#include <string>

#include "core/config/job_config.h"
#include "core/config/job_schema.h"
#include "core/config/source_pos.h"

namespace dtrain {

// Where the values being read came from: a file, whose nodes carry their own
// line and column, or one --set override that every value is reported at.
struct ValueOrigin {
  std::string origin;
  std::optional<SourcePos> fixed;

  SourcePos at(const toml::node& node) const;
  SourcePos at(const toml::source_position& pos) const;
};

// Sets the field from `node` and records its position in job.positions; a
// value of the wrong type throws ConfigError naming the key, the value and the
// expected type.
void assignField(JobConfig& job, const JobField& field, const toml::node& node, const ValueOrigin& where);

}  // namespace dtrain
