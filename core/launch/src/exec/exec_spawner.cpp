// ExecSpawner: each rank a ChildProcess that execs the command (torchrun's way).
#include <fmt/format.h>

#include "ddph/common/error.h"
#include "ddph/launch/rank_spawner.h"

namespace ddph::launch {

using common::ChildOptions;
using common::ChildProcess;
using common::ExitStatus;
using common::StreamTarget;

namespace {

class ExecRank final : public RankProcess {
 public:
  explicit ExecRank(std::unique_ptr<ChildProcess> child)
      : child_(std::move(child)), pid_(child_->pid()) {}
  pid_t pid() const override { return pid_; }
  pid_t processGroup() const override { return child_->processGroup(); }
  int takePipe(int stream) override { return child_->takePipe(stream); }
  std::optional<ExitStatus> poll() override { return child_->poll(); }
  void kill() override { child_->kill(); }

 private:
  std::unique_ptr<ChildProcess> child_;
  pid_t pid_;  ///< kept after the child is reaped (ChildProcess::pid() is then -1)
};

class ExecSpawner final : public RankSpawner {
 public:
  ExecSpawner(std::vector<std::string> command, EnvMap common)
      : command_(std::move(command)), common_(std::move(common)) {}

  std::unique_ptr<RankProcess> spawn(int /*rank*/, const EnvMap& own, pid_t group) override {
    ChildOptions child;
    child.env = common_;
    for (const auto& [name, value] : own) child.env[name] = value;
    child.out = child.err = StreamTarget::pipe();
    child.processGroup = group;
    return std::make_unique<ExecRank>(std::make_unique<ChildProcess>(command_, std::move(child)));
  }

 private:
  std::vector<std::string> command_;
  EnvMap common_;
};

}  // namespace

std::unique_ptr<RankSpawner> makeExecSpawner(std::vector<std::string> command, EnvMap common) {
  return std::make_unique<ExecSpawner>(std::move(command), std::move(common));
}

}  // namespace ddph::launch
