// The test binaries' main: doctest's, with OpenBLAS's kernels pinned and
// SIGPIPE ignored as dtrain's own main does (cli/main.cpp). Tests that kill a peer mid-collective write
// to its closed socket; the write must fail with EPIPE and be reported, not
// end the test process with the signal (which it did under load, now and then).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>

#include "core/backend/cpu/openblas_kernels.h"

int main(int argc, char** argv) {
  // The kernels dtrain computes with (see cli/main.cpp); the tolerances are theirs.
  dtrain::pinOpenblasKernels(argv);
  std::signal(SIGPIPE, SIG_IGN);
  return doctest::Context(argc, argv).run();
}
