// The worker processes of one host: dtrain on each host starts one process
// per local device or CPU slot and watches them. When one fails (a non-zero
// exit, or killed by a signal) the host reports which and ends the others
// cleanly (SIGTERM, then SIGKILL after a grace period), so no process is
// left running. A SIGINT/SIGTERM sent to the host's dtrain is passed on to
// the workers, which checkpoint and stop together.
//
// Not thread-safe: one WorkerProcesses per host process, used from its main
// thread.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

struct WorkerLaunch {
  std::string label;                                     // "rank 3 (node 1, slot 1)": for messages
  std::vector<std::string> argv;                         // argv[0] is the program to run
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  // The run may go on without it (a parameter server's worker other than
  // the chief, in an asynchronous mode): its failure is reported, not fatal.
  bool survivable = false;
};

struct WorkersOutcome {
  int exit_code = 0;    // 0 when every worker succeeded, else the first failure's code (128+signal)
  std::string failure;  // "rank 1 (node 0, slot 1, pid 4242) was killed by signal 9 (SIGKILL)"; "" when none
};

class WorkerProcesses {
 public:
  // `grace` is how long stopped workers get to exit after SIGTERM.
  explicit WorkerProcesses(std::chrono::milliseconds grace = std::chrono::seconds(10));
  ~WorkerProcesses();  // kills (SIGKILL) and reaps any worker still running
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  // Starts every worker; throws Error naming the one that could not start
  // (after ending those already started).
  void start(const std::vector<WorkerLaunch>& workers);

  // Waits until every worker has ended. `poll` runs every ~50 ms on this
  // thread; when it returns a non-empty reason (the coordinator saw a peer
  // die elsewhere, say) the workers are stopped with that as the failure.
  // A survivable worker's failure goes to `survived` (launch index, what
  // happened) and the others run on.
  WorkersOutcome wait(const std::function<std::string()>& poll = {},
                      const std::function<void(size_t, const std::string&)>& survived = {});

  // Ends the worker launched `index`-th at once (SIGKILL), as a run that
  // dropped it needs when it cannot act on being told (frozen).
  void kill(size_t index);

  // The pids, in launch order.
  std::vector<pid_t> pids() const;
  // Whether some worker has exited with status 0 (its run is over).
  bool anyEndedCleanly() const;
  // Ends (SIGKILL) the workers stopped by a signal (SIGSTOP): once the run
  // is over without them, nothing will wake them.
  void killStopped();

 private:
  struct Child {
    std::string label;
    bool survivable = false;
    pid_t pid = -1;
    bool running = false;
    int status = 0;
  };
  void stopAll(int sig);
  // SIGTERM, the grace period, then SIGKILL for any still running; reaps all.
  void endAll();
  void reapAll(std::chrono::milliseconds within);
  std::vector<Child> children_;
  std::chrono::milliseconds grace_;
};

// "exited with status 3" / "was killed by signal 9 (SIGKILL)" for a waitpid status.
std::string describeExit(int status);
// The shell's exit code for a waitpid status: the exit status, or 128 + signal.
int exitCodeOf(int status);

}  // namespace dtrain
