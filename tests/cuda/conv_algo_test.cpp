// The choice of cuDNN convolution algorithms (cuda/conv_algo.h, Note [cudnn
// determinism]) on made-up heuristics, without a GPU: what is tried and in
// which order, under which math type, the error when nothing is left, and
// the cache that makes every call of one convolution, a replay among them,
// run the algorithm its first call ran.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

#if DTR_HAVE_CUDA
#include "cuda/conv_algo.h"
#endif

namespace dtr {
namespace {

#if DTR_HAVE_CUDA

using cuda::ConvAlgoCache;
using cuda::ConvCandidate;
using cuda::ConvChoice;
using cuda::ConvKey;
using cuda::ConvMath;
using cuda::ConvPass;

constexpr int kNotSupported = 3000;  // CUDNN_STATUS_NOT_SUPPORTED

ConvCandidate ok(int algo, ConvMath m = ConvMath::kFma, size_t ws = 0) {
  return {.algo = algo, .status = 0, .deterministic = true, .math = m, .workspace = ws};
}

std::vector<int> algos(const std::vector<ConvChoice>& order) {
  std::vector<int> r;
  for (const ConvChoice& c : order) r.push_back(c.algo);
  return r;
}

TEST(ConvAlgoOrder, KeepsSupportedDeterministicEntriesInCudnnsOrder) {
  std::vector<ConvCandidate> listed = {ok(6, ConvMath::kFma, 1 << 20), ok(1), ok(0), ok(5), ok(2)};
  listed[1].deterministic = false;                   // dropped
  listed[3].status = kNotSupported;                  // dropped
  listed[4].status = kNotSupported + 7;              // a refined NOT_SUPPORTED code: dropped
  const auto order = cuda::conv_algo_order(ConvPass::kForward, listed, ConvMath::kFma, "conv2d");
  EXPECT_EQ(algos(order), (std::vector<int>{6, 0}));  // cuDNN's order, not the enum's
  for (const ConvChoice& c : order) EXPECT_EQ(c.math, ConvMath::kFma);
}

TEST(ConvAlgoOrder, DropsTheAlgorithmsCudnnDocumentsAsNonDeterministic) {
  // Listed as deterministic, yet never tried: backward data ALGO_0,
  // backward filter ALGO_0 and ALGO_3.
  const std::vector<ConvCandidate> data = {ok(0), ok(1), ok(3)};
  EXPECT_EQ(algos(cuda::conv_algo_order(ConvPass::kBackwardData, data, ConvMath::kFma, "g")),
            (std::vector<int>{1, 3}));
  const std::vector<ConvCandidate> filter = {ok(3), ok(0), ok(6), ok(1)};
  EXPECT_EQ(algos(cuda::conv_algo_order(ConvPass::kBackwardFilter, filter, ConvMath::kFma, "g")),
            (std::vector<int>{6, 1}));
  // Forward algorithm 0 (IMPLICIT_GEMM) is deterministic.
  EXPECT_EQ(algos(cuda::conv_algo_order(ConvPass::kForward, data, ConvMath::kFma, "g")),
            (std::vector<int>{0, 1, 3}));
}

TEST(ConvAlgoOrder, NothingLeftIsNotImplementedNamingTheConvolutionAndEachEntry) {
  EXPECT_THROW(cuda::conv_algo_order(ConvPass::kForward, {}, ConvMath::kFma, "conv2d"), NotImplementedError);
  std::vector<ConvCandidate> listed = {ok(0), ok(3)};
  listed[1].status = kNotSupported;
  try {
    cuda::conv_algo_order(ConvPass::kBackwardData, listed, ConvMath::kDefault, "conv2d_input_grad (shapes)");
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("conv2d_input_grad (shapes)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ALGO_0 (non-deterministic)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("FFT_TILING (cuDNN status 3000)"), std::string::npos) << msg;
  }
}

TEST(ConvAlgoOrder, MathNeverAllowsMoreThanTheDtypesPolicy) {
  EXPECT_EQ(cuda::conv_math_for(kFloat32), ConvMath::kFma);  // no TF32 (Note [library determinism])
  EXPECT_EQ(cuda::conv_math_for(kFloat16), ConvMath::kTensorOp);
  EXPECT_EQ(cuda::conv_math_for(kBFloat16), ConvMath::kTensorOp);
  EXPECT_EQ(cuda::conv_math_for(kFloat64), ConvMath::kDefault);

  // float32: entries listed with tensor-op or default math run as FMA, and
  // an algorithm listed twice is tried once.
  const std::vector<ConvCandidate> f32 = {ok(1, ConvMath::kTensorOp), ok(1, ConvMath::kFma),
                                          ok(0, ConvMath::kDefault), ok(2, ConvMath::kTensorOpAllowConversion)};
  const auto o32 = cuda::conv_algo_order(ConvPass::kForward, f32, ConvMath::kFma, "f32");
  EXPECT_EQ(o32, (std::vector<ConvChoice>{{1, ConvMath::kFma}, {0, ConvMath::kFma}, {2, ConvMath::kFma}}));

  // float16/bfloat16: an entry's own math where it allows no more than
  // tensor ops, never down-conversion.
  const std::vector<ConvCandidate> f16 = {ok(1, ConvMath::kTensorOp), ok(1, ConvMath::kDefault),
                                          ok(0, ConvMath::kTensorOpAllowConversion), ok(2, ConvMath::kFma)};
  const auto o16 = cuda::conv_algo_order(ConvPass::kForward, f16, ConvMath::kTensorOp, "f16");
  EXPECT_EQ(o16, (std::vector<ConvChoice>{{1, ConvMath::kTensorOp},
                                          {1, ConvMath::kDefault},
                                          {0, ConvMath::kTensorOp},
                                          {2, ConvMath::kFma}}));

  // float64: default math, no tensor-op math.
  const std::vector<ConvCandidate> f64 = {ok(1, ConvMath::kTensorOp), ok(0, ConvMath::kDefault)};
  const auto o64 = cuda::conv_algo_order(ConvPass::kForward, f64, ConvMath::kDefault, "f64");
  EXPECT_EQ(o64, (std::vector<ConvChoice>{{1, ConvMath::kDefault}, {0, ConvMath::kDefault}}));
}

TEST(ConvAlgoOrder, NamesCudnnsAlgorithms) {
  EXPECT_EQ(cuda::conv_algo_name(ConvPass::kForward, 1), "IMPLICIT_PRECOMP_GEMM");
  EXPECT_EQ(cuda::conv_algo_name(ConvPass::kForward, 7), "WINOGRAD_NONFUSED");
  EXPECT_EQ(cuda::conv_algo_name(ConvPass::kBackwardData, 3), "FFT_TILING");
  EXPECT_EQ(cuda::conv_algo_name(ConvPass::kBackwardFilter, 6), "FFT_TILING");
  EXPECT_EQ(cuda::conv_algo_name(ConvPass::kBackwardFilter, 3), "ALGO_3");
  EXPECT_EQ(cuda::conv_algo_name(ConvPass::kBackwardData, 42), "algo 42");
}

ConvKey key() {
  return ConvKey{.device = 0,
                 .pass = ConvPass::kForward,
                 .x = {3, 4, 11, 9},
                 .w = {6, 2, 3, 3},
                 .y = {3, 6, 6, 5},
                 .stride = {2, 1},
                 .padding = {1, 2},
                 .dilation = {1, 2},
                 .groups = 2,
                 .dtype = kFloat32,
                 .math = ConvMath::kFma};
}

TEST(ConvAlgoCache, AHitReturnsTheFirstChoiceWithoutChoosingAgain) {
  ConvAlgoCache cache;
  bool chose = false;
  const ConvChoice first =
      cache.find_or_choose(key(), [] { return ConvChoice{6, ConvMath::kFma}; }, &chose);
  EXPECT_TRUE(chose);
  EXPECT_EQ(first, (ConvChoice{6, ConvMath::kFma}));
  int calls = 0;
  const ConvChoice again = cache.find_or_choose(
      key(),
      [&] {
        ++calls;
        return ConvChoice{1, ConvMath::kFma};
      },
      &chose);
  EXPECT_FALSE(chose);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(again, first);
  EXPECT_EQ(cache.find(key()), first);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ConvAlgoCache, EveryPartOfTheKeyTellsConvolutionsApart) {
  ConvAlgoCache cache;
  const auto put = [&](const ConvKey& k, int algo) {
    return cache.find_or_choose(k, [&] { return ConvChoice{algo, k.math}; }).algo;
  };
  put(key(), 0);
  std::vector<ConvKey> others(12, key());
  others[0].device = 1;
  others[1].pass = ConvPass::kBackwardData;
  others[2].x[0] = 4;
  others[3].w[3] = 1;
  others[4].y[2] = 7;
  others[5].stride[1] = 2;
  others[6].padding[0] = 0;
  others[7].dilation[1] = 1;
  others[8].groups = 1;
  others[9].dtype = kBFloat16;
  others[10].math = ConvMath::kTensorOp;
  others[11].dtype = kFloat64;
  for (size_t i = 0; i < others.size(); ++i) EXPECT_EQ(put(others[i], int(i) + 1), int(i) + 1) << i;
  EXPECT_EQ(cache.size(), others.size() + 1);
  EXPECT_EQ(put(key(), 99), 0);  // still the first choice
}

TEST(ConvAlgoCache, AFailedChoiceCachesNothing) {
  ConvAlgoCache cache;
  EXPECT_THROW(cache.find_or_choose(key(), []() -> ConvChoice { throw NotImplementedError("none ran"); }),
               NotImplementedError);
  EXPECT_FALSE(cache.find(key()).has_value());
  EXPECT_EQ(cache.find_or_choose(key(), [] { return ConvChoice{1, ConvMath::kFma}; }).algo, 1);
}

TEST(ConvAlgoCache, ThreadsMissingOnOneKeyMakeOneChoice) {
  ConvAlgoCache cache;
  std::atomic<int> calls{0};
  std::vector<int> got(8, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      got[size_t(t)] = cache
                           .find_or_choose(key(),
                                           [&] {
                                             ++calls;
                                             return ConvChoice{t, ConvMath::kFma};
                                           })
                           .algo;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(calls.load(), 1);
  for (int g : got) EXPECT_EQ(g, got[0]);
}

TEST(ConvAlgoCache, KeyStringNamesTheConvolution) {
  const std::string s = cuda::conv_key_str(key());
  for (const char* part : {"cuda:0", "forward", "[3, 4, 11, 9]", "[6, 2, 3, 3]", "[3, 6, 6, 5]", "stride [2, 1]",
                           "padding [1, 2]", "dilation [1, 2]", "groups 2", "float32", "FMA math"}) {
    EXPECT_NE(s.find(part), std::string::npos) << part << " in " << s;
  }
  EXPECT_EQ(&cuda::conv_algo_cache(), &cuda::conv_algo_cache());
}

#endif

}  // namespace
}  // namespace dtr
