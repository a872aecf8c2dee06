#include "core/train/resume_point.h"

#include <filesystem>

namespace dtrain {

ResumePoint loadResumePoint(const std::string& path, std::vector<std::string>* warnings) {
  ResumePoint p;
  p.checkpoint = loadLatestCheckpoint(path, warnings);
  trainStateFromToml(p.checkpoint.state_toml, p.checkpoint.dir + "/state.toml", &p.state, &p.job);
  // The run continues where its checkpoints are, whatever directory the
  // original command was started from.
  p.job.job.run_dir = std::filesystem::path(p.checkpoint.dir).parent_path().parent_path().string();
  return p;
}

}  // namespace dtrain
