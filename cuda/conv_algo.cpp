// The choice of cuDNN convolution algorithms as host code (cuda/conv_algo.h,
// Note [cudnn determinism]).
#include "cuda/conv_algo.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/shape.h"

namespace dtr::cuda {
namespace {

// How much a math type allows, least first: FMA only; tensor cores (TF32
// for float32 data); tensor cores with down-conversion.
int permissiveness(ConvMath m) {
  switch (m) {
    case ConvMath::kFma: return 0;
    case ConvMath::kDefault: return 1;
    case ConvMath::kTensorOp: return 2;
    case ConvMath::kTensorOpAllowConversion: return 3;
  }
  return 3;
}

// cuDNN documents these as non-deterministic (cudnn_ops.h's enums say so
// too): backward data ALGO_0, backward filter ALGO_0 and ALGO_3.
bool documented_nondeterministic(ConvPass pass, int algo) {
  switch (pass) {
    case ConvPass::kForward: return false;
    case ConvPass::kBackwardData: return algo == 0;
    case ConvPass::kBackwardFilter: return algo == 0 || algo == 3;
  }
  return true;
}

std::string ints_str(std::span<const int64_t> v) { return shape_str(IntList(v)); }

}  // namespace

ConvMath conv_math_for(DType dt) {
  switch (dt) {
    case kFloat64: return ConvMath::kDefault;
    case kFloat16:
    case kBFloat16: return ConvMath::kTensorOp;
    default: return ConvMath::kFma;
  }
}

std::vector<ConvChoice> conv_algo_order(ConvPass pass, std::span<const ConvCandidate> candidates, ConvMath policy,
                                        std::string_view what) {
  std::vector<ConvChoice> order;
  std::vector<std::string> dropped;
  for (const ConvCandidate& c : candidates) {
    const std::string name = conv_algo_name(pass, c.algo);
    if (c.status != 0) {
      dropped.push_back(fmt::format("{} (cuDNN status {})", name, c.status));
      continue;
    }
    if (!c.deterministic || documented_nondeterministic(pass, c.algo)) {
      dropped.push_back(fmt::format("{} (non-deterministic)", name));
      continue;
    }
    const ConvMath m = permissiveness(c.math) <= permissiveness(policy) ? c.math : policy;
    const ConvChoice choice{c.algo, m};
    if (std::find(order.begin(), order.end(), choice) == order.end()) order.push_back(choice);
  }
  if (order.empty()) {
    throw NotImplementedError(fmt::format(
        "{}: cuDNN offers no deterministic algorithm for this convolution (its heuristics listed {})", what,
        dropped.empty() ? std::string("none") : fmt::format("{}", fmt::join(dropped, ", "))));
  }
  return order;
}

std::string conv_algo_name(ConvPass pass, int algo) {
  static constexpr std::array<std::string_view, 8> kForward = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
      "WINOGRAD_NONFUSED"};
  static constexpr std::array<std::string_view, 6> kData = {"ALGO_0",     "ALGO_1",   "FFT",
                                                            "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static constexpr std::array<std::string_view, 7> kFilter = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  using Names = std::span<const std::string_view>;
  const Names names = pass == ConvPass::kForward        ? Names(kForward)
                      : pass == ConvPass::kBackwardData ? Names(kData)
                                                        : Names(kFilter);
  if (algo >= 0 && size_t(algo) < names.size()) return std::string(names[size_t(algo)]);
  return fmt::format("algo {}", algo);
}

std::string_view conv_math_name(ConvMath m) {
  switch (m) {
    case ConvMath::kDefault: return "DEFAULT";
    case ConvMath::kTensorOp: return "TENSOR_OP";
    case ConvMath::kTensorOpAllowConversion: return "TENSOR_OP_ALLOW_CONVERSION";
    case ConvMath::kFma: return "FMA";
  }
  return "?";
}

std::string_view conv_pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward: return "forward";
    case ConvPass::kBackwardData: return "backward data";
    case ConvPass::kBackwardFilter: return "backward filter";
  }
  return "?";
}

std::string conv_key_str(const ConvKey& k) {
  return fmt::format("cuda:{} {} x {} * w {} -> y {}, stride {}, padding {}, dilation {}, groups {}, {}, {} math",
                     k.device, conv_pass_name(k.pass), ints_str(k.x), ints_str(k.w), ints_str(k.y),
                     ints_str(k.stride), ints_str(k.padding), ints_str(k.dilation), k.groups,
                     dtype_name(k.dtype), conv_math_name(k.math));
}

std::optional<ConvChoice> ConvAlgoCache::find(const ConvKey& key) const {
  std::lock_guard lock(mu_);
  const auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

size_t ConvAlgoCache::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

ConvAlgoCache& conv_algo_cache() {
  static ConvAlgoCache* cache = new ConvAlgoCache;  // never destroyed: kernels may run during static destruction
  return *cache;
}

}  // namespace dtr::cuda
