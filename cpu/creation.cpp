// Kernels of the factory ops. Random ones draw from Philox at the recorded
// (seed, offset): element i uses draws 2i and 2i+1, so the values are
// independent of threading and identical on replay.
#include <cmath>

#include "cpu/kernels.h"

namespace dtr::cpu {
namespace {

template <typename F>
void fill_with(const TensorArg& out, F&& value_of) {
  const int64_t osz = itemsize(out.dtype);
  parallel_for(out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    if (out.dtype == kFloat32) {
      float* p = out.ptr<float>();
      for (int64_t i = b; i < e; ++i) p[i] = float(value_of(i));
    } else {
      for (int64_t i = b; i < e; ++i) store_from_double(out.data + i * osz, out.dtype, value_of(i));
    }
  });
}

// Integer outputs from integer arguments: exact in int64 (no trip through double).
template <typename F>
void fill_with_ints(const TensorArg& out, F&& value_of) {
  const int64_t osz = itemsize(out.dtype);
  parallel_for(out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) store_from_int(out.data + i * osz, out.dtype, value_of(i));
  });
}

void full_kernel(const KernelContext& c) {
  if (c.attrs.has("int_value") && !is_floating(c.outputs[0].dtype)) {
    const int64_t v = c.attrs.i("int_value");
    fill_with_ints(c.outputs[0], [v](int64_t) { return v; });
    return;
  }
  const double v = c.attrs.f("value");
  fill_with(c.outputs[0], [v](int64_t) { return v; });
}

void arange_kernel(const KernelContext& c) {
  if (c.attrs.has("int_start") && !is_floating(c.outputs[0].dtype)) {
    // Unsigned arithmetic: wraps where a signed product would be undefined
    // (every value of the range itself lies between start and end).
    const auto start = uint64_t(c.attrs.i("int_start")), step = uint64_t(c.attrs.i("int_step"));
    fill_with_ints(c.outputs[0], [=](int64_t i) { return int64_t(start + uint64_t(i) * step); });
    return;
  }
  const double start = c.attrs.f("start"), step = c.attrs.f("step");
  fill_with(c.outputs[0], [=](int64_t i) { return start + double(i) * step; });
}

// Random fills read their draws through one PhiloxStream per chunk of
// elements (each 4-draw block computed once).
template <typename F>
void fill_random(const TensorArg& out, const RngState& rng, F&& value_of) {
  const int64_t osz = itemsize(out.dtype);
  parallel_for(out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    PhiloxStream draw(rng);
    if (out.dtype == kFloat32) {
      float* p = out.ptr<float>();
      for (int64_t i = b; i < e; ++i) p[i] = float(value_of(draw, i));
    } else {
      for (int64_t i = b; i < e; ++i) store_from_double(out.data + i * osz, out.dtype, value_of(draw, i));
    }
  });
}

void rand_kernel(const KernelContext& c) {
  fill_random(c.outputs[0], c.rng, [](PhiloxStream& draw, int64_t i) {
    return double(u32_to_uniform(draw(uint64_t(2 * i))));
  });
}

void randn_kernel(const KernelContext& c) {
  fill_random(c.outputs[0], c.rng, [](PhiloxStream& draw, int64_t i) {
    const uint32_t a = draw(uint64_t(2 * i));
    return double(box_muller(a, draw(uint64_t(2 * i + 1))));
  });
}

void randint_kernel(const KernelContext& c) {
  const RngState rng = c.rng;
  const int64_t low = c.attrs.i("low"), range = c.attrs.i("high") - low;
  const TensorArg& out = c.outputs[0];
  const int64_t osz = itemsize(out.dtype);
  parallel_for(out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    PhiloxStream draw(rng);
    for (int64_t i = b; i < e; ++i) {
      const uint64_t hi = draw(uint64_t(2 * i));
      const uint64_t r = (hi << 32) | draw(uint64_t(2 * i + 1));
      store_from_int(out.data + i * osz, out.dtype, low + int64_t(r % uint64_t(range)));
    }
  });
}

}  // namespace

void register_creation_kernels() {
  set_cpu_kernel("full", full_kernel);
  set_cpu_kernel("arange", arange_kernel);
  set_cpu_kernel("rand", rand_kernel);
  set_cpu_kernel("randn", randn_kernel);
  set_cpu_kernel("randint", randint_kernel);
}

}  // namespace dtr::cpu
