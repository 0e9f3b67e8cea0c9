// How the cuDNN convolutions choose their algorithm (Note [cudnn
// determinism], cuda/conv_ops.cpp), as plain host code that calls no cuDNN:
// which of the algorithms cuDNN's heuristics list are tried, in which order
// and under which math type, and the process-wide cache of the algorithm a
// convolution of one key ran with. tests/cuda/conv_algo_test.cpp drives it
// with made-up candidate lists on a machine without a GPU.
//
// ConvMath mirrors cudnnMathType_t and a ConvCandidate's `algo` is the
// cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of its pass, by value
// (cuda/conv_ops.cpp static_asserts the values this file names).
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace dtr::cuda {

/// Which operand of the convolution x (input) * w (filter) -> y (output) a
/// cuDNN call writes: y (forward), x (backward data) or w (backward filter).
enum class ConvPass : uint8_t { kForward, kBackwardData, kBackwardFilter };

/// cudnnMathType_t, by value.
enum class ConvMath : uint8_t { kDefault = 0, kTensorOp = 1, kTensorOpAllowConversion = 2, kFma = 3 };

/// The math type of a convolution of `dt` (Note [library determinism]):
/// float32 kFma (true FP32; kDefault would allow TF32 tensor cores from
/// sm_80, and the library has no TF32), float16/bfloat16 kTensorOp (tensor
/// cores, no down-conversion), float64 kDefault.
ConvMath conv_math_for(DType dt);

/// One entry of cuDNN's heuristics (cudnnConvolution*AlgoPerf_t).
struct ConvCandidate {
  int algo = 0;
  int status = 0;               // cudnnStatus_t; 0 is CUDNN_STATUS_SUCCESS
  bool deterministic = false;   // determinism == CUDNN_DETERMINISTIC
  ConvMath math = ConvMath::kDefault;
  size_t workspace = 0;         // cuDNN's estimate, bytes
};

/// An algorithm and the math type it runs under.
struct ConvChoice {
  int algo = 0;
  ConvMath math = ConvMath::kDefault;
  bool operator==(const ConvChoice&) const = default;
};

/// What to try, in order, from `candidates` (cuDNN's heuristics, in cuDNN's
/// order) for a convolution of math type `policy`: the entries with status
/// success that are deterministic, in their order, each under its own math
/// type where that allows no more than `policy` (FMA < default < tensor op
/// < tensor op with conversion), under `policy` otherwise (so a float32
/// entry listed with tensor-op math runs as FMA, never TF32); the
/// algorithms cuDNN documents as non-deterministic (backward data ALGO_0,
/// backward filter ALGO_0 and ALGO_3) are dropped whatever their entry says,
/// and a repeated choice is tried once. NotImplementedError naming `what`
/// and every entry with why it was dropped when nothing is left.
std::vector<ConvChoice> conv_algo_order(ConvPass pass, std::span<const ConvCandidate> candidates, ConvMath policy,
                                        std::string_view what);

/// cuDNN's name of algorithm `algo` of `pass` without its prefix
/// ("IMPLICIT_PRECOMP_GEMM", "ALGO_1", "FFT_TILING"), or "algo <n>".
std::string conv_algo_name(ConvPass pass, int algo);
/// "FMA", "DEFAULT", "TENSOR_OP", "TENSOR_OP_ALLOW_CONVERSION".
std::string_view conv_math_name(ConvMath m);
/// "forward", "backward data", "backward filter".
std::string_view conv_pass_name(ConvPass pass);

/// What decides a convolution's algorithm: the device, the pass, the
/// forward's operand shapes (x, w, y), its stride, padding, dilation and
/// groups, the dtype and the math type.
struct ConvKey {
  int device = 0;
  ConvPass pass = ConvPass::kForward;
  std::array<int64_t, 4> x{}, w{}, y{};
  std::array<int64_t, 2> stride{}, padding{}, dilation{};
  int64_t groups = 1;
  DType dtype = kFloat32;
  ConvMath math = ConvMath::kDefault;
  auto operator<=>(const ConvKey&) const = default;
};

/// "cuda:0 forward x [..] * w [..] -> y [..], stride [..], padding [..],
/// dilation [..], groups g, float32, FMA math", for messages.
std::string conv_key_str(const ConvKey& k);

/// The algorithm each convolution key ran with, so that every later call of
/// the key, a replay among them (Note [replay equals original]), runs the
/// same algorithm under the same math type and gives the same bits. Once
/// chosen, a key's choice never changes in the process.
class ConvAlgoCache {
 public:
  /// The choice cached for `key`; on a miss, `choose()`'s, cached when it
  /// returns (nothing is cached when it throws). The lock is held through
  /// choose(), so threads that miss on one key together make one choice.
  /// `*chose` (when given) tells whether this call ran choose().
  template <typename Choose>
  ConvChoice find_or_choose(const ConvKey& key, Choose&& choose, bool* chose = nullptr) {
    std::lock_guard lock(mu_);
    if (const auto it = map_.find(key); it != map_.end()) {
      if (chose != nullptr) *chose = false;
      return it->second;
    }
    const ConvChoice c = choose();
    map_.emplace(key, c);
    if (chose != nullptr) *chose = true;
    return c;
  }
  std::optional<ConvChoice> find(const ConvKey& key) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<ConvKey, ConvChoice> map_;
};

/// The process's cache, which the CUDA convolutions use.
ConvAlgoCache& conv_algo_cache();

}  // namespace dtr::cuda
