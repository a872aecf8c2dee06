// Winograd F(4x4,3x3)'s 1-D transforms and phase shuffles, written once for
// any vector type: the 8-lane kernels (winograd4x4_forward.cpp,
// winograd4x4_backward.cpp, vec8.h's V8) and the 512-bit ones
// (winograd4x4_avx512.cpp) instantiate them with their own types. The vector
// type brings, found by argument-dependent lookup, + - * and unary -,
// times(float, V), interleave and deinterleave. Includes nothing: the
// AVX-512 file may include no header that defines functions (see
// cpu_kernels_avx512.h). Internal to core/backend/cpu.
#pragma once
namespace dtrain::ops::winograd4 {

// B^T d for six values (the input transform, along either axis).
template <class V>
inline void inputRows(const V* d, V* out) {
  const V t1 = d[4] - times(4.0f, d[2]), t2 = d[3] - times(4.0f, d[1]);
  const V t3 = d[4] - d[2], t4 = times(2.0f, d[3] - d[1]);
  out[0] = times(4.0f, d[0]) - times(5.0f, d[2]) + d[4];
  out[1] = t1 + t2;
  out[2] = t1 - t2;
  out[3] = t3 + t4;
  out[4] = t3 - t4;
  out[5] = times(4.0f, d[1]) - times(5.0f, d[3]) + d[5];
}

// A^T m for six values -> four (the output transform).
template <class V>
inline void outputRows(const V* m, V* out) {
  const V s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
  out[0] = m[0] + s12 + s34;
  out[1] = d12 + times(2.0f, d34);
  out[2] = s12 + times(4.0f, s34);
  out[3] = d12 + times(8.0f, d34) + m[5];
}

// A g for four values -> six (the output-gradient transform).
template <class V>
inline void gradOutputRows(const V* g, V* out) {
  const V e = g[0] + g[2], o = g[1] + g[3];
  const V e4 = g[0] + times(4.0f, g[2]), o4 = times(2.0f, g[1]) + times(8.0f, g[3]);
  out[0] = g[0];
  out[1] = e + o;
  out[2] = e - o;
  out[3] = e4 + o4;
  out[4] = e4 - o4;
  out[5] = g[3];
}

// B v for six values (the input-gradient transform).
template <class V>
inline void gradInputRows(const V* v, V* out) {
  const V s12 = v[1] + v[2], d12 = v[1] - v[2], s34 = v[3] + v[4], d34 = v[3] - v[4];
  out[0] = times(4.0f, v[0]);
  out[1] = times(4.0f, v[5] - d12) - times(2.0f, d34);
  out[2] = -(times(5.0f, v[0]) + times(4.0f, s12) + s34);
  out[3] = d12 + times(2.0f, d34) - times(5.0f, v[5]);
  out[4] = v[0] + s12 + s34;
  out[5] = v[5];
}

// Four vectors of 4L consecutive values (L lanes a vector, or per half for
// the paired 512-bit type) -> the four phases (p[k] lane j = value 4j + k),
// and back.
template <class V>
inline void splitPhases(V a, V b, V c, V d, V* p) {
  V e0, o0, e1, o1;
  deinterleave(a, b, e0, o0);
  deinterleave(c, d, e1, o1);
  deinterleave(e0, e1, p[0], p[2]);
  deinterleave(o0, o1, p[1], p[3]);
}
template <class V>
inline void mergePhases(const V* p, V* out) {
  V lo02, hi02, lo13, hi13;
  interleave(p[0], p[2], lo02, hi02);
  interleave(p[1], p[3], lo13, hi13);
  interleave(lo02, lo13, out[0], out[1]);
  interleave(hi02, hi13, out[2], out[3]);
}

}  // namespace dtrain::ops::winograd4
