// The CPU kernel levels this host can run, for tests that hold each level's
// kernels to the same reference.
#pragma once
#include <doctest/doctest.h>

#include <vector>

#include "core/backend/cpu/cpu_level.h"

namespace dtrain::testing {

inline std::vector<cpu::Level> levelsHere() {
  std::vector<cpu::Level> out;
  const cpu::Level best = cpu::bestLevel(cpu::detectFeatures());
  for (cpu::Level l : {cpu::Level::Avx2, cpu::Level::Avx512, cpu::Level::Avx512Bf16})
    if (static_cast<int>(l) <= static_cast<int>(best)) out.push_back(l);
  if (out.size() == 1) MESSAGE("this CPU runs the AVX2 level only: the AVX-512 kernels are not exercised");
  return out;
}

}  // namespace dtrain::testing
