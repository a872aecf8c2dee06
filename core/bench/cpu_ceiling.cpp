#include "core/bench/cpu_ceiling.h"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <dnnl.hpp>
#include <random>
#include <thread>

#include "core/backend/cpu/cpu_level.h"
#include "core/backend/cpu/gemm_levels.h"
#include "core/bench/register_peaks.h"

namespace dtrain {

std::vector<ProductShape> denseStepProducts(const std::vector<int64_t>& widths, int64_t batch) {
  std::vector<ProductShape> out;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const int64_t in = widths[l], units = widths[l + 1];
    out.push_back({false, true, batch, units, in});  // y = x w^T (w: [units, in])
    if (l > 0) out.push_back({false, false, batch, in, units});  // dx = dy w
    out.push_back({true, false, units, in, batch});              // dw = dy^T x
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// Runs body(thread) on `threads` threads at once, each repeating it until
// `seconds` pass; returns the sum over threads of (work / seconds).
template <class Body>
double concurrentRate(int threads, double seconds, Body body) {
  std::vector<double> rates(threads, 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto once = body(t);  // set-up and a first, untimed round
      once();
      double work = 0;
      const Clock::time_point start = Clock::now();
      double elapsed = 0;
      do {
        work += once();
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      } while (elapsed < seconds);
      rates[t] = work / elapsed;
    });
  for (auto& th : pool) th.join();
  double sum = 0;
  for (double r : rates) sum += r;
  return sum;
}

struct Operands {
  std::vector<float> a, b, c;
};

// The largest a, b and c any of the shapes needs, in elements: one set of
// buffers serves every product of a pass.
struct OperandSizes {
  int64_t a = 0, b = 0, c = 0;
};

OperandSizes largestOperands(const std::vector<ProductShape>& shapes) {
  OperandSizes most;
  for (const ProductShape& s : shapes) {
    most.a = std::max(most.a, s.m * s.k);
    most.b = std::max(most.b, s.k * s.n);
    most.c = std::max(most.c, s.m * s.n);
  }
  return most;
}

Operands operandsFor(const std::vector<ProductShape>& shapes, std::mt19937& rng) {
  const OperandSizes most = largestOperands(shapes);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Operands o{std::vector<float>(most.a), std::vector<float>(most.b), std::vector<float>(most.c)};
  for (float& x : o.a) x = u(rng);
  for (float& x : o.b) x = u(rng);
  return o;
}

// Rate of passes over `shapes` per second by `level`'s fp32 products.
double fp32Passes(const std::vector<ProductShape>& shapes, cpu::Level level, int threads, double seconds) {
  return concurrentRate(threads, seconds, [&](int t) {
    std::mt19937 rng(t + 1);
    auto ops = std::make_shared<Operands>(operandsFor(shapes, rng));
    return [ops, &shapes, level] {
      for (const ProductShape& s : shapes)
        ops::gemmAtLevel(level, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, ops->a.data(), s.trans_a ? s.m : s.k,
                         ops->b.data(), s.trans_b ? s.k : s.n, 0.0f, ops->c.data(), s.n);
      return 1.0;
    };
  });
}

// Rate of passes over `shapes` per second by oneDNN's bf16 products (bf16
// operands, fp32 results), primitives made once per thread.
double bf16Passes(const std::vector<ProductShape>& shapes, int threads, double seconds) {
  using dnnl::memory;
  struct Bf16Pass {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    std::vector<dnnl::matmul> products;
    std::vector<std::vector<memory>> args;  // a, b, c per product
    std::vector<uint16_t> a, b;
    std::vector<float> c;
  };
  return concurrentRate(threads, seconds, [&](int) {
    omp_set_num_threads(1);
    auto p = std::make_shared<Bf16Pass>();
    const OperandSizes most = largestOperands(shapes);
    p->a.assign(most.a, 0x3f80);  // 1.0
    p->b.assign(most.b, 0x3f80);
    p->c.assign(most.c, 0.0f);
    for (const ProductShape& s : shapes) {
      const memory::desc a({s.m, s.k}, memory::data_type::bf16, s.trans_a ? memory::dims{1, s.m} : memory::dims{s.k, 1});
      const memory::desc b({s.k, s.n}, memory::data_type::bf16, s.trans_b ? memory::dims{1, s.k} : memory::dims{s.n, 1});
      const memory::desc c({s.m, s.n}, memory::data_type::f32, memory::dims{s.n, 1});
      p->products.emplace_back(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), p->engine));
      p->args.push_back({memory(a, p->engine, p->a.data()), memory(b, p->engine, p->b.data()),
                         memory(c, p->engine, p->c.data())});
    }
    return [p] {
      for (size_t i = 0; i < p->products.size(); ++i)
        p->products[i].execute(p->stream, {{DNNL_ARG_SRC, p->args[i][0]},
                                           {DNNL_ARG_WEIGHTS, p->args[i][1]},
                                           {DNNL_ARG_DST, p->args[i][2]}});
      p->stream.wait();
      return 1.0;
    };
  });
}

double loopRate(double (*loop)(int64_t), int threads, double seconds) {
  return concurrentRate(threads, seconds, [loop](int) { return [loop] { return loop(20'000'000); }; }) / 1e9;
}

}  // namespace

CpuCeiling measureCpuCeiling(const std::vector<ProductShape>& shapes, int threads, double seconds) {
  CpuCeiling c;
  c.threads = threads;
  for (const ProductShape& s : shapes) c.step_flops += s.flops();
  const cpu::Level level = cpu::activeLevel();
  openblas_set_num_threads(1);  // as training runs it: one replica per thread
  const bool wide = level != cpu::Level::Avx2, bf16 = level == cpu::Level::Avx512Bf16;
  c.fma256 = loopRate(bench::fmaLoop256, threads, seconds);
  if (wide) c.fma512 = loopRate(bench::avx512::fmaLoop512, threads, seconds);
  if (bf16) c.dot_bf16 = loopRate(bench::avx512_bf16::dotBf16Loop512, threads, seconds);
  if (shapes.empty()) return c;
  c.step_avx2_s = 1.0 / fp32Passes(shapes, cpu::Level::Avx2, threads, seconds);
  if (wide) c.step_avx512_s = 1.0 / fp32Passes(shapes, cpu::Level::Avx512, threads, seconds);
  if (bf16) c.step_bf16_s = 1.0 / bf16Passes(shapes, threads, seconds);
  return c;
}

}  // namespace dtrain
