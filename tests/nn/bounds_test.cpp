// The vectorised kernels store whole vectors and let surplus lanes spill into
// memory they overwrite later; these tests check that nothing outside an
// op's documented output is ever written (sentinels around every output),
// for geometries whose sizes are not multiples of the vector width.
#include <doctest/doctest.h>

#include <vector>

#include "core/backend/ops.h"
#include "nn_test_util.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

constexpr float kSentinel = -12345.0f;
constexpr int64_t kGuard = 64;

// A buffer of `size` floats with kGuard sentinels on both sides.
struct Guarded {
  std::vector<float> buf;
  explicit Guarded(int64_t size) : buf(static_cast<size_t>(size + 2 * kGuard), kSentinel) {}
  float* data() { return buf.data() + kGuard; }
  bool guardsIntact() const {
    for (int64_t i = 0; i < kGuard; ++i)
      if (buf[i] != kSentinel || buf[buf.size() - 1 - i] != kSentinel) return false;
    return true;
  }
};

void fillRandom(float* p, int64_t n, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) p[i] = rng.normal();
}

}  // namespace

TEST_CASE("winograd transforms write only their outputs") {
  Rng rng(61);
  const int64_t hw[][2] = {{3, 3}, {5, 7}, {14, 14}, {9, 19}, {6, 33}, {17, 8}, {36, 70}};
  for (const ops::WinogradVariant* wv : {&ops::winograd2x2(), &ops::winograd4x4()})
    for (const auto& e : hw)
      for (int64_t pad = 0; pad <= 2; ++pad) {
        const int64_t c = 3, f = 5, n = 3, planes = wv->elements;
        const ops::Window2d g{c, e[0], e[1], 3, 3, 1, 1, pad, pad};
        if (!ops::winogradSupported(g)) continue;
        CAPTURE(wv->tile);
        CAPTURE(e[0]);
        CAPTURE(e[1]);
        CAPTURE(pad);
        const int64_t t = wv->tiles(g).perSample(), cols = n * t, ld = cols + 3;
        const int64_t vplane = ops::winogradPlaneStride(c, ld), zplane = ops::winogradPlaneStride(f, ld);
        Guarded x(n * c * g.inPlane()), v(planes * vplane), y(n * f * g.outPlane()), z(planes * zplane),
            dx(n * c * g.inPlane());
        fillRandom(x.data(), n * c * g.inPlane(), rng);
        wv->inputTransform(x.data(), n, g, v.data(), ld, vplane);
        CHECK(v.guardsIntact());
        // Columns past this call's tiles keep their contents.
        bool untouched = true;
        for (int64_t xi = 0; xi < planes; ++xi)
          for (int64_t r = 0; r < c; ++r)
            for (int64_t col = cols; col < ld; ++col)
              untouched &= v.data()[xi * vplane + r * ld + col] == kSentinel;
        CHECK(untouched);
        Guarded m(planes * zplane);
        fillRandom(m.data(), planes * zplane, rng);
        wv->outputTransform(m.data(), ld, zplane, n, f, g, nullptr, true, y.data());
        CHECK(y.guardsIntact());
        fillRandom(y.data(), n * f * g.outPlane(), rng);
        wv->gradOutputTransform(y.data(), y.data(), n, f, g, z.data(), ld, zplane);
        CHECK(z.guardsIntact());
        wv->gradInputTransform(v.data(), ld, vplane, n, g, dx.data());
        CHECK(dx.guardsIntact());
      }
}

TEST_CASE("pooling and im2col kernels write only their outputs") {
  Rng rng(62);
  const int64_t hw[][2] = {{2, 2}, {7, 5}, {14, 14}, {9, 35}, {33, 18}};
  for (const auto& e : hw) {
    CAPTURE(e[0]);
    CAPTURE(e[1]);
    const int64_t c = 3, n = 2;
    const ops::Window2d g{c, e[0], e[1], 2, 2, 2, 2, 0, 0};
    const int64_t in = n * c * g.inPlane(), out = n * c * g.outPlane();
    Guarded x(in), y(out), dy(out), dx(in);
    std::vector<int32_t> idx(static_cast<size_t>(out + 2 * kGuard), -7);
    fillRandom(x.data(), in, rng);
    fillRandom(dy.data(), out, rng);
    ops::maxPoolForward(x.data(), n, g, y.data(), idx.data() + kGuard);
    CHECK(y.guardsIntact());
    bool idx_ok = true;
    for (int64_t i = 0; i < kGuard; ++i) idx_ok &= idx[i] == -7 && idx[idx.size() - 1 - i] == -7;
    CHECK(idx_ok);
    ops::maxPoolBackward(dy.data(), idx.data() + kGuard, n, g, dx.data());
    CHECK(dx.guardsIntact());
    const ops::Window2d k3{c, e[0], e[1], 2, 2, 1, 1, 1, 0};
    Guarded col(c * 4 * k3.outPlane()), back(c * k3.inPlane());
    ops::im2col(x.data(), k3, col.data());
    CHECK(col.guardsIntact());
    ops::col2im(col.data(), k3, back.data());
    CHECK(back.guardsIntact());
  }
}

TEST_CASE("gemmUnpacked and weightGradRows write only their outputs") {
  Rng rng(63);
  for (int64_t n : {1, 15, 17, 33}) {
    const int64_t m = 7, k = 5;
    Guarded a(m * k), b(k * n), c(m * n), dw(m * 3), db(m);
    fillRandom(a.data(), m * k, rng);
    fillRandom(b.data(), k * n, rng);
    ops::gemmUnpacked(false, m, n, k, a.data(), k, b.data(), n, c.data(), n);
    CHECK(c.guardsIntact());
    std::fill(dw.data(), dw.data() + m * 3, 0.0f);
    std::fill(db.data(), db.data() + m, 0.0f);
    ops::weightGradRows(c.data(), nullptr, m, n, b.data(), 3, dw.data(), db.data());
    CHECK(dw.guardsIntact());
    CHECK(db.guardsIntact());
  }
}
