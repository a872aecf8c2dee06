#include "core/backend/cpu/openblas_kernels.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern "C" char* openblas_get_corename(void);

namespace dtrain {

bool isPreHaswellCore(const char* name) {
  static const char* const kOld[] = {"prescott",    "core2",   "penryn",    "dunnington", "nehalem",
                                     "sandybridge", "atom",    "katmai",    "coppermine", "northwood",
                                     "banias",      "opteron", "barcelona", "bobcat",     "generic"};
  for (const char* old : kOld)
    if (strcasecmp(name, old) == 0) return true;
  return false;
}

const char* openblasCoreName() { return openblas_get_corename(); }

void pinOpenblasKernels(char** argv) {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // the user's choice, or already pinned
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  const char* core = openblasCoreName();
  // DTRAIN_CPU=avx2 stands for a Haswell-class CPU: its products too.
  const char* level = std::getenv("DTRAIN_CPU");
  const bool avx2_level = level && strcasecmp(level, "avx2") == 0;
  if (!core || !(isPreHaswellCore(core) || (avx2_level && strcasecmp(core, "Haswell") != 0))) return;
  if (::setenv("OPENBLAS_CORETYPE", "Haswell", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OPENBLAS_CORETYPE");  // not run again: go on as loaded
#else
  (void)argv;
#endif
}

}  // namespace dtrain
