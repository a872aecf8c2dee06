// The numeric kernels the layers are built from: raw pointers and extents, no
// tensors, no allocation. Declared once here; the CPU implementations live in
// core/backend/cpu/, future CUDA ones in core/backend/cuda/ behind the same
// declarations.
//
// Conventions: row-major, images NCHW, one float per element. A function that
// "accumulates" adds (+=) into its output; one that "writes" overwrites it
// completely (callers need not zero it first). Every function is reentrant: no
// static mutable state, so different threads may call them on different buffers.
#pragma once
#include <cstdint>

namespace dtrain {
struct StepScalars;
}  // namespace dtrain

namespace dtrain::ops {

// ---------------------------------------------------------------- geometry --

// A sliding 2-D window over `channels` planes of height x width, as used by
// convolution and pooling. Padding is implicit (never materialised).
struct Window2d {
  int64_t channels = 1, height = 1, width = 1;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;

  int64_t outHeight() const { return (height + 2 * pad_h - kernel_h) / stride_h + 1; }
  int64_t outWidth() const { return (width + 2 * pad_w - kernel_w) / stride_w + 1; }
  int64_t inPlane() const { return height * width; }
  int64_t outPlane() const { return outHeight() * outWidth(); }
};

// -------------------------------------------------------------------- gemm --

// c[m,n] = alpha * op(a)[m,k] * op(b)[k,n] + beta * c[m,n]; op transposes when
// asked. Leading dimensions are row strides of the stored (untransposed)
// matrices. With beta == 0, c is written without being read.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// c[m,n] = act(op(a)[m,k] * b[k,n] + row_bias[m]) (b not transposed), for a
// small op(a) that fits L1 and a short k (up to a few hundred): no packing,
// which is faster than gemm there. row_bias may be null; act is relu when
// `relu`, else the identity. Writes c.
void gemmUnpacked(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc, const float* row_bias = nullptr, bool relu = false);

// dw[m,n] += g[m,p] * col[n,p]^T and, when dbias is given, dbias[m] += the row
// sums of g, where g = dy, or dy masked by relu_out > 0 when relu_out is given
// (a fused relu's backward). For a tiny dw and a long p (a first layer's
// weight gradient from its im2col matrix), where gemm's packing dominates.
void weightGradRows(const float* dy, const float* relu_out, int64_t m, int64_t p, const float* col, int64_t n,
                    float* dw, float* dbias);

// ------------------------------------------------------ bias + activation --

// y[r,c] = act(y[r,c] + bias[c]) for a [rows, cols] matrix (dense layers).
// bias may be null; act is relu when `relu`, else the identity.
void biasActRows(float* y, const float* bias, int64_t rows, int64_t cols, bool relu);
// y[p,i] = act(y[p,i] + bias[p]) for `planes` planes of `plane` elements (conv).
void biasActPlanes(float* y, const float* bias, int64_t planes, int64_t plane, bool relu);
// dbias[c] += sum over rows of dy[r,c].
void biasGradRows(const float* dy, int64_t rows, int64_t cols, float* dbias);
// dbias[p] += sum of plane p of dy ([planes, plane]).
void biasGradPlanes(const float* dy, int64_t planes, int64_t plane, float* dbias);

// y = max(x, 0); x and y may be the same buffer.
void reluForward(const float* x, float* y, int64_t n);
// dx = y > 0 ? dy : 0, where y is relu's output; dx may alias dy.
void reluBackward(const float* y, const float* dy, float* dx, int64_t n);

// ------------------------------------------------------------ convolution --

// One sample: x [C,H,W] -> col [C*kh*kw, Ho*Wo] (row (c,i,j), column (oy,ox));
// padded positions read as zero. Writes col.
void im2col(const float* x, const Window2d& g, float* col);
// The adjoint of im2col for one sample: writes dx [C,H,W] as the sum of the
// col entries that read each input element.
void col2im(const float* col, const Window2d& g, float* dx);

// 3x3 stride-1 convolution by Winograd's F(2x2,3x3) minimal filtering: each
// 2x2 output tile costs 16 multiplies per (filter, channel) instead of 36.
// Tiles cover the output in 2x2 blocks (tilesH x tilesW per sample, the last
// row/column of tiles clipped when the output extent is odd). A transformed
// tensor holds 16 planes (one per transform element xi), each [rows][ld] with
// one column per tile: element (xi, r, t) at buf[xi * plane + r * ld + t]. So
// the 16 products are ordinary gemms: M_xi[F,T] = U_xi[F,C] * V_xi[C,T].
// Sample s of a call occupies columns [s*T, (s+1)*T).
// Precondition for all winograd* functions: winogradSupported(g).
constexpr int64_t kWinogradMaxPaddedWidth = 1024;
// Kernel 3x3, stride 1, padding <= 2, width + 2 * pad_w <= kWinogradMaxPaddedWidth.
bool winogradSupported(const Window2d& g);
struct WinogradTiles {
  int64_t rows = 0, cols = 0;  // tiles per sample along H and W
  int64_t perSample() const { return rows * cols; }
};
WinogradTiles winogradTiles(const Window2d& g);
// A plane stride >= rows * ld that keeps the 16 planes in different L1 cache
// sets (they are streamed together).
int64_t winogradPlaneStride(int64_t rows, int64_t ld);
// u[16][F][C] (contiguous planes) = G w G^T for w [F,C,3,3]. Writes u.
void winogradFilterTransform(const float* w, int64_t filters, int64_t channels, float* u);
// dw[F,C,3,3] += G^T du G for du [16][F][C] (the weight gradient in the
// transformed domain, see winogradGradOutputTransform).
void winogradFilterGradTransform(const float* du, int64_t filters, int64_t channels, float* dw);
// v (rows = C) = B^T d B for every 4x4 input tile d of samples x[0..n) [n,C,H,W].
// Writes the columns [0, n*T) of v.
void winogradInputTransform(const float* x, int64_t n, const Window2d& g, float* v, int64_t ldv,
                            int64_t plane);
// y[n,F,Ho,Wo] = act(A^T m A + bias) for m (rows = F). bias may be null. Writes y.
void winogradOutputTransform(const float* m, int64_t ldm, int64_t plane, int64_t n, int64_t filters,
                             const Window2d& g, const float* bias, bool relu, float* y);
// z (rows = F) = A dy A^T for every 2x2 tile of dy [n,F,Ho,Wo] (zero beyond
// the output edge). When relu_out is given, dy is first masked by relu_out > 0
// (the backward of a fused relu). Writes z. Then, with v from the forward input:
//   weight gradient (transformed): du_xi += z_xi * v_xi^T, then winogradFilterGradTransform;
//   input gradient (transformed):  dv_xi = u_xi^T * z_xi, then winogradGradInputTransform.
void winogradGradOutputTransform(const float* dy, const float* relu_out, int64_t n, int64_t filters,
                                 const Window2d& g, float* z, int64_t ldz, int64_t plane);
// dx[n,C,H,W] = sum over tiles of B dv B^T, each 4x4 result added at its tile's
// input position (tiles overlap by 2; padded positions dropped). Writes dx.
void winogradGradInputTransform(const float* dv, int64_t ldv, int64_t plane, int64_t n, const Window2d& g,
                                float* dx);

// One Winograd variant's geometry and transforms, for callers that choose
// between them: winograd2x2() holds the functions above; winograd4x4() holds
// F(4x4,3x3)'s, with the same contracts for 4x4 output tiles, 6x6 input tiles
// (overlapping by 2) and 36 transformed planes (xi = 6a + b): 36 multiplies
// per output tile and (filter, channel) instead of 144. Same precondition
// (winogradSupported).
struct WinogradVariant {
  int tile;      // output tile side: 2 or 4
  int elements;  // transformed planes, (tile + 2)^2
  int tile_sum;  // the plane of A dY A^T that holds each dY tile's sum (the bias gradient)
  decltype(&winogradTiles) tiles;
  decltype(&winogradFilterTransform) filterTransform;
  decltype(&winogradFilterGradTransform) filterGradTransform;
  decltype(&winogradInputTransform) inputTransform;
  decltype(&winogradOutputTransform) outputTransform;
  decltype(&winogradGradOutputTransform) gradOutputTransform;
  decltype(&winogradGradInputTransform) gradInputTransform;
};
const WinogradVariant& winograd2x2();
const WinogradVariant& winograd4x4();

// ---------------------------------------------------------------- pooling --

// Max pooling of n samples [n,C,H,W] -> y [n,C,Ho,Wo]; padded positions never
// win. argmax [n,C,Ho,Wo] receives the index (within the input plane, h*W+w) of
// each window's maximum, first one on ties; it may be null (inference).
// Writes y and argmax.
void maxPoolForward(const float* x, int64_t n, const Window2d& g, float* y, int32_t* argmax);
// dx [n,C,H,W] = dy routed to the argmax positions (summed where windows
// overlap). Writes dx.
void maxPoolBackward(const float* dy, const int32_t* argmax, int64_t n, const Window2d& g, float* dx);
// Average pooling, padding counted as zeros (divisor always kh*kw, as PyTorch's
// count_include_pad=True). Writes y.
void avgPoolForward(const float* x, int64_t n, const Window2d& g, float* y);
// The adjoint of avgPoolForward. Writes dx.
void avgPoolBackward(const float* dy, int64_t n, const Window2d& g, float* dx);

// ---------------------------------------------------------------- dropout --

// Which elements dropout keeps is a pure function of (seed, layer, global
// sample index, element index within the sample): a counter-based hash, no
// generator state. So a sample gets the same mask whichever thread or rank
// processes it and however the batch is split, and backward recomputes the
// mask instead of storing it. first_sample is the global index of row 0.
struct DropoutKey {
  uint64_t seed = 0;
  int64_t layer = 0;
  int64_t first_sample = 0;
  // GPU only: read seed and first_sample from here at run time instead
  // (core/backend/step_scalars.h); null on the CPU.
  const StepScalars* on_device = nullptr;
};
// y = keep ? x / (1 - rate) : 0 (inverted dropout), rows = samples of `cols`
// elements. rate in [0, 1). y must not overlap x.
void dropoutForward(const float* x, float* y, int64_t rows, int64_t cols, float rate, const DropoutKey& key);
// dx = keep ? dy / (1 - rate) : 0 with the same mask as dropoutForward.
void dropoutBackward(const float* dy, float* dx, int64_t rows, int64_t cols, float rate,
                     const DropoutKey& key);

// ------------------------------------------------------------------- loss --

// Softmax cross-entropy over n rows of `classes` logits against the target
// q = (1 - smoothing) * onehot(label) + smoothing / classes (label smoothing;
// 0 = the plain one-hot loss). Returns the SUM of the per-sample losses
// -sum_c q_c log softmax_c (in double). When dlogits is given it is written
// with (softmax - q) * grad_scale; when correct is given it is incremented by
// the number of rows whose first maximal logit is the label.
// Numerically stable (the row maximum is subtracted before exponentiation).
// Throws dtrain::Error for a label outside [0, classes).
double softmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t n, int64_t classes,
                           float grad_scale, float* dlogits, int64_t* correct, float smoothing = 0.0f);

// The per-token loss of a language model: rows of `width` logits of which
// the first `classes` are the vocabulary (the rest, a vocabulary padded for
// speed, take no probability and get a zero gradient); a row whose label is
// negative (a padding token) is ignored: no loss, a zero gradient, not
// counted. Otherwise as softmaxCrossEntropy (without smoothing when 0), but
// for rows as long as a vocabulary: float exponentials summed in float lanes
// per block of 1024 and the blocks in double (within a few parts in 10^6 of a
// row's sum). Adds the rows
// it counted to *counted. Throws dtrain::Error for a label >= classes.
double tokenCrossEntropy(const float* logits, const int32_t* labels, int64_t rows, int64_t width,
                         int64_t classes, float grad_scale, float* dlogits, int64_t* correct,
                         int64_t* counted, float smoothing);

// ------------------------------------------------------- 16-bit rounding --

// The 16-bit float formats of [job] precision.
enum class HalfFormat : uint8_t {
  Bf16,  // bfloat16: fp32's range, 8 significant bits
  Fp16,  // IEEE binary16: 11 significant bits, finite up to 65504, subnormal below 2^-14
};

// y[i] = x[i] rounded to the nearest value of `format` (ties to even), as a
// float; x == y is allowed. Beyond the format's range a value becomes an
// infinity of its sign (fp16: from 65520 up); a NaN stays a NaN.
void roundTo16Bits(HalfFormat format, const float* x, float* y, int64_t n);
// The same rounding, stored as the format's bits (a GPU's 16-bit tensors),
// and back: decode(encode(x)) == roundTo16Bits(x), NaNs aside.
void encode16Bits(HalfFormat format, const float* x, uint16_t* bits, int64_t n);
void decode16Bits(HalfFormat format, const uint16_t* bits, float* x, int64_t n);

}  // namespace dtrain::ops
