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

void full_kernel(const KernelContext& c) {
  const double v = c.attrs.f("value");
  fill_with(c.outputs[0], [v](int64_t) { return v; });
}

void arange_kernel(const KernelContext& c) {
  const double start = c.attrs.f("start"), step = c.attrs.f("step");
  fill_with(c.outputs[0], [=](int64_t i) { return start + double(i) * step; });
}

void rand_kernel(const KernelContext& c) {
  const RngState rng = c.rng;
  fill_with(c.outputs[0], [rng](int64_t i) {
    return double(u32_to_uniform(philox_u32(rng, uint64_t(2 * i))));
  });
}

void randn_kernel(const KernelContext& c) {
  const RngState rng = c.rng;
  fill_with(c.outputs[0], [rng](int64_t i) {
    return double(box_muller(philox_u32(rng, uint64_t(2 * i)), philox_u32(rng, uint64_t(2 * i + 1))));
  });
}

void randint_kernel(const KernelContext& c) {
  const RngState rng = c.rng;
  const int64_t low = c.attrs.i("low"), range = c.attrs.i("high") - low;
  const TensorArg& out = c.outputs[0];
  const int64_t osz = itemsize(out.dtype);
  parallel_for(out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint64_t r = (uint64_t(philox_u32(rng, uint64_t(2 * i))) << 32) |
                         philox_u32(rng, uint64_t(2 * i + 1));
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
