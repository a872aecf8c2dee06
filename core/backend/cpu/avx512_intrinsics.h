// <immintrin.h> for the AVX-512 kernel files (*_avx512.cpp). GCC 12's
// avx512fintrin.h seeds its masked intrinsics with a deliberately
// uninitialised vector (_mm512_undefined_ps), which its own warning flags.
// Internal to core/backend/cpu.
#pragma once
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
