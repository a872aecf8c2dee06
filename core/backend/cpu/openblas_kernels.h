// Which of OpenBLAS's kernel sets this process computes with.
//
// OpenBLAS picks its kernels when it is loaded, before main, by the CPU it
// recognises (or by OPENBLAS_CORETYPE). Debian 12's OpenBLAS (0.3.21) does
// not recognise CPUs newer than itself, such as Sapphire Rapids: it falls
// back to Prescott's SSE3 kernels, several times slower than the AVX2/FMA
// ones the CPU runs, and its AVX-512 kernels compute wrong results on some
// of them. dtrain wants the Haswell kernels there, the ones its tests and
// tolerances were made with.
#pragma once

namespace dtrain {

// The kernel set the loaded OpenBLAS chose ("Haswell", "Prescott", ...).
const char* openblasCoreName();
// Whether `core` is one of OpenBLAS's x86 kernel sets from before AVX2 and
// FMA (what it falls back to on a CPU it does not know).
bool isPreHaswellCore(const char* core);

// When OpenBLAS chose a fallback older than Haswell on a CPU with AVX2 and
// FMA, or other kernels than Haswell's while DTRAIN_CPU=avx2 lowers dtrain
// to a Haswell-class CPU's level (so that it computes what such a CPU does),
// and OPENBLAS_CORETYPE was not set: sets OPENBLAS_CORETYPE=Haswell and
// runs this program again with the same arguments (execv of
// /proc/self/exe; child processes inherit the setting, so this happens once
// per command). Returns otherwise, and when the re-execution fails (the
// process then goes on with the fallback kernels). Call first in main.
void pinOpenblasKernels(char** argv);

}  // namespace dtrain
