// GEMM through dtr on cuda:0 (cuBLAS, TF32 off), float32 and bfloat16, in
// TFLOP/s, for scripts/gpu-check.sh to set beside torch.matmul on the same
// device, each product's values checked first.
//
// Per dtype and size n (n x n times n x n): A and B drawn from N(0, 1) on the
// device (rounded to the dtype), C = A @ B once and checked, then 3 warm-up
// products and the mean of 10, timed between device synchronizations.
//
// The check: 64 rows of C (evenly spaced, the first and last included)
// against dtr's CPU matmul of the same rows of A and the same B in float64
// (exact inputs: the dtype's values are float64 values), element by element:
//     |C_ij - R_ij| <= out_ulp * |R_ij| + acc_tol * S_ij,
//     S_ij = sqrt(sum_k A_ik^2 B_kj^2)
// S is the size of the terms' rounding noise; acc_tol bounds the float32
// accumulation both dtypes use (CUBLAS_COMPUTE_32F): 5e-5. Measured with
// numpy on 64 rows, n = 4096: float32 summed in sequence stays within 0.2 of
// the bound (OpenBLAS: 0.03), while inputs rounded to TF32 exceed it in 86%
// of the elements, by up to 30 times, so a GEMM with TF32 on fails. out_ulp
// is the rounding of the result to the dtype, twice its unit roundoff:
// 2^-23 for float32, 2^-7 for bfloat16. Any element outside fails the size.
//
//   cuda_gemm [--device cuda:0] [--sizes 1024,4096,8192] [--dtypes float32,bfloat16]
//
// --device cpu runs the same check on the CPU's kernels (the check's own
// test on a machine without a GPU). Exit status: 0 every product within its
// bound; 1 a mismatch or an error; 2 no CUDA device (no driver, or none
// present), or bad flags.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "dtr/dtr.h"

namespace {

constexpr int kCheckRows = 64;
constexpr double kAccumulationTolerance = 5e-5;

double output_ulp(dtr::DType dt) { return dt == dtr::kBFloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -23); }

struct Check {
  bool ok = true;
  double worst_ratio = 0;  // max over elements of |C - R| / bound
  double max_abs_error = 0;
  std::string first_bad;
};

/// C's checked rows against the float64 reference on the CPU.
Check check_product(const dtr::Tensor& a, const dtr::Tensor& b, const dtr::Tensor& c) {
  const dtr::Device cpu(dtr::kCPU);
  const int64_t n = a.shape()[0];
  std::vector<int64_t> rows;
  for (int i = 0; i < kCheckRows && i < n; ++i) {
    const int64_t r = kCheckRows >= n ? i : i * (n - 1) / (kCheckRows - 1);
    if (rows.empty() || rows.back() != r) rows.push_back(r);
  }
  const int64_t m = static_cast<int64_t>(rows.size());
  const dtr::Tensor idx = dtr::from_vector<int64_t>(rows, {m});
  const dtr::Tensor a64 = a.to(cpu).to(dtr::kFloat64).index_select(0, idx);
  const dtr::Tensor b64 = b.to(cpu).to(dtr::kFloat64);
  const std::vector<double> want = dtr::matmul(a64, b64).to_vector<double>();
  const std::vector<double> noise2 = dtr::matmul(a64 * a64, b64 * b64).to_vector<double>();
  const std::vector<double> got = c.to(cpu).index_select(0, idx).to_vector<double>();
  const double ulp = output_ulp(a.dtype());
  Check out;
  for (size_t e = 0; e < got.size(); ++e) {
    const double err = std::abs(got[e] - want[e]);
    const double bound = ulp * std::abs(want[e]) + kAccumulationTolerance * std::sqrt(noise2[e]);
    out.max_abs_error = std::max(out.max_abs_error, err);
    const double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
    out.worst_ratio = std::max(out.worst_ratio, ratio);
    if (!(err <= bound) && out.ok) {  // NaN fails too
      out.ok = false;
      std::ostringstream s;
      s << "C[" << rows[e / size_t(n)] << "][" << e % size_t(n) << "] = " << got[e] << ", float64 reference "
        << want[e] << ", |error| " << err << " > bound " << bound;
      out.first_bad = s.str();
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

[[noreturn]] void usage(const char* argv0, const std::string& message) {
  std::fprintf(stderr, "%s: %s\nusage: %s [--device cuda:0|cpu] [--sizes 1024,4096,8192] [--dtypes float32,bfloat16]\n",
               argv0, message.c_str(), argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda:0";
  std::vector<int64_t> sizes = {1024, 4096, 8192};
  std::vector<dtr::DType> dtypes = {dtr::kFloat32, dtr::kBFloat16};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(argv[0], "missing value of " + flag);
    const std::string value = argv[++i];
    if (flag == "--device") {
      device_name = value;
    } else if (flag == "--sizes") {
      sizes.clear();
      for (const std::string& s : split(value)) {
        char* end = nullptr;
        const long long n = std::strtoll(s.c_str(), &end, 10);
        if (*end != '\0' || n < 1) usage(argv[0], "--sizes: '" + s + "' is not a positive integer");
        sizes.push_back(n);
      }
      if (sizes.empty()) usage(argv[0], "--sizes is empty");
    } else if (flag == "--dtypes") {
      dtypes.clear();
      for (const std::string& s : split(value)) {
        if (s == "float32") dtypes.push_back(dtr::kFloat32);
        else if (s == "bfloat16") dtypes.push_back(dtr::kBFloat16);
        else usage(argv[0], "--dtypes: '" + s + "' is not float32 or bfloat16");
      }
      if (dtypes.empty()) usage(argv[0], "--dtypes is empty");
    } else {
      usage(argv[0], "unknown flag " + flag);
    }
  }

  dtr::Device device;
  try {
    device = dtr::Device(device_name);
  } catch (const std::exception& e) {
    usage(argv[0], "--device " + device_name + ": " + e.what());
  }
  const dtr::Backend* be = dtr::find_backend(device.type);
  if (device.type == dtr::kCUDA) {
    const int count = be == nullptr ? 0 : be->device_count();
    if (be == nullptr) {
      std::fprintf(stderr, "cuda_gemm: FAILED: this build has no CUDA backend (DTR_CUDA=OFF)\n");
      return 2;
    }
    if (count <= device.index) {
      std::fprintf(stderr,
                   "cuda_gemm: FAILED: no CUDA device: dtr sees %d CUDA device(s) and needs %s (no driver, a "
                   "driver older than the CUDA runtime, or no GPU)\n",
                   count, device.str().c_str());
      return 2;
    }
    const dtr::Roofline roof = be->roofline(device.index);
    std::printf("cuda_gemm: dtr sees %d CUDA device(s); %s: %.1f GiB, roofline %.1f TFLOP/s float32, %.0f GB/s\n",
                count, device.str().c_str(), double(be->memory_bytes(device.index)) / double(1 << 30),
                roof.peak_flops / 1e12, roof.bandwidth / 1e9);
  }
  const auto sync = [&] {
    if (be != nullptr && be->synchronize != nullptr) be->synchronize(device.index);
  };
  std::printf("cuda_gemm: check of 64 rows against float64 on the CPU: |C - R| <= out_ulp*|R| + %g*sqrt(sum A^2 B^2) "
              "(out_ulp 2^-23 float32, 2^-7 bfloat16)\n",
              kAccumulationTolerance);

  int failures = 0;
  try {
    dtr::manual_seed(0);
    for (const dtr::DType dt : dtypes) {
      for (const int64_t n : sizes) {
        const dtr::TensorOptions on_device = dtr::TensorOptions().device(device);
        const dtr::Tensor a = dtr::randn({n, n}, on_device).to(dt);
        const dtr::Tensor b = dtr::randn({n, n}, on_device).to(dt);
        const Check check = check_product(a, b, dtr::matmul(a, b));
        for (int i = 0; i < 3; ++i) (void)dtr::matmul(a, b);
        sync();
        constexpr int kReps = 10;
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kReps; ++i) (void)dtr::matmul(a, b);
        sync();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kReps;
        const double tflops = 2.0 * double(n) * double(n) * double(n) / s / 1e12;
        std::printf("dtr %s %lldx%lldx%lld: %.1f TFLOP/s (%.3f ms); values %s: max |error| %.3g, worst "
                    "error/bound %.3f\n",
                    std::string(dtr::dtype_name(dt)).c_str(), static_cast<long long>(n), static_cast<long long>(n),
                    static_cast<long long>(n), tflops, s * 1e3, check.ok ? "ok" : "MISMATCH", check.max_abs_error,
                    check.worst_ratio);
        if (!check.ok) {
          std::printf("cuda_gemm: FAILED: %s %lld: %s\n", std::string(dtr::dtype_name(dt)).c_str(),
                      static_cast<long long>(n), check.first_bad.c_str());
          ++failures;
        }
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_gemm: FAILED: %s\n", e.what());
    return 1;
  }
  if (failures > 0) {
    std::printf("cuda_gemm: %d product(s) outside the bound\n", failures);
    return 1;
  }
  return 0;
}
