// The sections and keys of a job file, in job_config.h order, with where each
// value lives in JobConfig. The parser, the --set overrides and the writer all
// read this one list, so a new field is added here once.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/config/job_config.h"

namespace dtrain {

using FieldRef = std::variant<int64_t*, int*, uint64_t*, double*, bool*, std::string*, std::vector<int64_t>*,
                              std::vector<double>*>;
using ConstFieldRef =
    std::variant<const int64_t*, const int*, const uint64_t*, const double*, const bool*, const std::string*,
                 const std::vector<int64_t>*, const std::vector<double>*>;

struct JobField {
  const char* section;
  const char* key;
  FieldRef (*ref)(JobConfig&);
  ConstFieldRef (*cref)(const JobConfig&);

  std::string dotted() const { return std::string(section) + "." + key; }
};

// Every plain field. model.layers and cluster.hosts are not among them: they
// are arrays of tables with their own readers and writers.
const std::vector<JobField>& jobFields();
// The section names, in order: job, model, data, ...
const std::vector<std::string>& jobSections();
// The keys a section accepts (model's include "layers", cluster's "hosts"), for "did you mean".
std::vector<std::string> sectionKeys(const std::string& section);
// The field for section.key, or nullptr.
const JobField* findField(const std::string& section, const std::string& key);
bool isSection(const std::string& name);

// "[optimizer] unknown key 'lr_rate' (did you mean 'lr'?)", the same for the
// job file and for --set.
std::string unknownKeyMessage(const std::string& section, const std::string& key);
// "unknown section [optimiser] (did you mean [optimizer]?)"
std::string unknownSectionMessage(const std::string& section);

}  // namespace dtrain
