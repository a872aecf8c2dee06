// Which of the CPU kernel sets this process computes with.
//
// One build serves a whole cluster: its baseline is x86-64-v3 (AVX2 and FMA),
// and the AVX-512 kernels (x86-64-v4) and the AVX512-BF16 ones are compiled
// beside it, in files of their own. The level is chosen once per process from
// what the CPU and the operating system report; DTRAIN_CPU may lower it (to
// measure the AVX2 path on an AVX-512 host, or to reproduce an older host's
// arithmetic), never raise it past what the CPU can run.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace dtrain::cpu {

enum class Level { Avx2 = 0, Avx512 = 1, Avx512Bf16 = 2 };

// What a CPU can run, as far as the kernel sets care.
struct Features {
  bool avx2 = false;         // AVX2 and FMA: the baseline
  bool avx512 = false;       // AVX-512 F, CD, BW, DQ and VL (x86-64-v4)
  bool avx512_bf16 = false;  // AVX512-BF16
};

// This CPU's, with the operating system's consent (registers saved on switches).
Features detectFeatures();

// "avx2", "avx512", "avx512_bf16".
const char* levelName(Level level);
// The inverse; nullopt for any other text.
std::optional<Level> parseLevel(std::string_view name);
// The highest level `have` can run (Avx2 also when it lacks AVX2: the
// baseline is all this build has then).
Level bestLevel(const Features& have);

// The level for a CPU with `have` when `requested` names one (a DTRAIN_CPU
// value) or is empty (the best it has). Throws ConfigError in one line for an
// unknown name, or a level this CPU cannot run.
Level chooseLevel(const Features& have, const char* requested);

// This process's level: chooseLevel(detectFeatures(), getenv("DTRAIN_CPU")),
// decided on the first call. Throws as chooseLevel does, on every call.
Level activeLevel();

// One line for --version and the start-up line: the level, what it computes
// with, and why it is not higher when DTRAIN_CPU lowered it.
std::string describeActiveLevel();

}  // namespace dtrain::cpu
