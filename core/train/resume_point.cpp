#include "core/train/resume_point.h"

#include <filesystem>

#include "core/train/checkpoint_layout.h"

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

std::string runDirOfPath(const std::string& path) {
  std::string run = path;
  while (run.size() > 1 && run.back() == '/') run.pop_back();
  std::filesystem::path p(run);
  const std::string name = p.filename().string();
  if (name == kLatestLinkName || parseStepDirName(name) >= 0) return p.parent_path().parent_path().string();
  if (name == kCheckpointsDirName) return p.parent_path().string();
  return run;
}

}  // namespace dtrain
