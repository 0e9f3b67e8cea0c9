// Fast paths of CPU kernels against their definitions: softmax over masked
// (-inf) scores, masked_fill with a repeating mask, strided copies by runs.
// Each fast path must give bitwise the values of the plain formula.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/accumulate.h"
#include "dtr/dtr.h"
#include "testing.h"

namespace dtr {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(SoftmaxKernel, MaskedScoresGiveExactZerosAndTheFormulaElsewhere) {
  manual_seed(3);
  const int64_t rows = 6, n = 37;
  std::vector<float> x = randn({rows, n}).to_vector<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      if (j > r * 6) x[size_t(r * n + j)] = -kInf;  // causal-style mask
  // Row 5 is fully masked except entry 0; add a fully masked row too.
  std::vector<float> all_masked(size_t(n), -kInf);
  x.insert(x.end(), all_masked.begin(), all_masked.end());
  const Tensor y = softmax(from_vector(x, {rows + 1, n}), -1);
  const std::vector<float> got = y.to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float mx = -kInf;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[size_t(r * n + j)]);
    std::vector<float> e(static_cast<size_t>(n));
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      e[size_t(j)] = std::exp(x[size_t(r * n + j)] - mx);
      sum += double(e[size_t(j)]);
    }
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) {
      const float want = e[size_t(j)] * inv;
      const float have = got[size_t(r * n + j)];
      EXPECT_EQ(std::memcmp(&want, &have, sizeof(float)), 0) << "row " << r << " col " << j;
      if (x[size_t(r * n + j)] == -kInf) {
        EXPECT_FALSE(std::signbit(have));
      }
    }
  }
  // Every score masked: NaN, as in PyTorch.
  for (int64_t j = 0; j < n; ++j) EXPECT_TRUE(std::isnan(got[size_t(rows * n + j)]));
  // A +inf score makes the sum NaN (inf - inf): all NaN, as in PyTorch,
  // the -inf entry included.
  const std::vector<float> with_inf = softmax(from_vector(std::vector<float>{1.0f, kInf, -kInf}, {3}), 0)
                                          .to_vector<float>();
  for (float f : with_inf) EXPECT_TRUE(std::isnan(f));
}

TEST(SoftmaxKernel, NaNSignedZerosAndStridedLanes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // A NaN anywhere in a lane makes the whole lane NaN (softmax,
  // log_softmax, cross_entropy), wherever it sits in the lane.
  for (int64_t at : {0, 5, 16, 39}) {
    std::vector<float> row(40, 0.5f);
    row[size_t(at)] = nan;
    const Tensor x = from_vector(row, {1, 40});
    for (float v : softmax(x, -1).to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << at;
    for (float v : log_softmax(x, -1).to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << at;
    EXPECT_TRUE(std::isnan(cross_entropy(x, from_vector(std::vector<int64_t>{3}, {1})).item<float>()));
  }
  // +0 and -0 tie for the max: the results are those of either.
  const std::vector<float> z = softmax(from_vector(std::vector<float>{-0.0f, 0.0f, -1.0f}, {3}), 0).to_vector<float>();
  const float e1 = std::exp(-1.0f);
  const float inv = float(1.0 / (1.0 + 1.0 + double(e1)));
  EXPECT_EQ(z[0], 1.0f * inv);
  EXPECT_EQ(z[1], 1.0f * inv);
  EXPECT_EQ(z[2], e1 * inv);
  // Lanes across a non-last dim (strided) give the contiguous lanes' values.
  manual_seed(6);
  const Tensor a = randn({33, 21});
  EXPECT_TRUE(testing::bitwise_equal(softmax(a, 0), transpose(softmax(transpose(a, 0, 1).contiguous(), 1), 0, 1)));
  EXPECT_TRUE(
      testing::bitwise_equal(log_softmax(a, 0), transpose(log_softmax(transpose(a, 0, 1).contiguous(), 1), 0, 1)));
}

/// layer_norm forward and backward of a (rows, n) float32 matrix, one row
/// at a time, with the operations the kernels document: statistics of
/// moments_contiguous, sums in double, column sums over rows in order.
struct LayerNormReference {
  std::vector<float> y, gx, gw, gb;
};
LayerNormReference layer_norm_reference(const std::vector<float>& x, const std::vector<float>& g,
                                        const std::vector<float>& w, const std::vector<float>& b,
                                        int64_t rows, int64_t n, double eps) {
  LayerNormReference ref;
  ref.y.resize(x.size());
  ref.gx.resize(x.size());
  std::vector<double> acc_w(size_t(n), 0.0), acc_b(size_t(n), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    const float* gr = g.data() + r * n;
    const cpu::Moments m = cpu::moments_contiguous(xr, n);
    const float mean = float(m.mean), rstd = float(1.0 / std::sqrt(m.var + eps));
    double sum_h = 0, sum_hx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float xhat = (xr[j] - mean) * rstd;
      ref.y[size_t(r * n + j)] = xhat * w[size_t(j)] + b[size_t(j)];
      const float h = gr[j] * w[size_t(j)];
      sum_h += double(h);
      sum_hx += double(h) * double(xhat);
      acc_w[size_t(j)] += double(gr[j] * xhat);
      acc_b[size_t(j)] += double(gr[j]);
    }
    const float mean_h = float(sum_h / double(n)), mean_hx = float(sum_hx / double(n));
    for (int64_t j = 0; j < n; ++j) {
      const float xhat = (xr[j] - mean) * rstd;
      const float h = gr[j] * w[size_t(j)];
      ref.gx[size_t(r * n + j)] = rstd * (h - mean_h - xhat * mean_hx);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    ref.gw.push_back(float(acc_w[size_t(j)]));
    ref.gb.push_back(float(acc_b[size_t(j)]));
  }
  return ref;
}

::testing::AssertionResult bitwise_equal_floats(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

TEST(LayerNormKernel, BitwiseTheDocumentedOperations) {
  manual_seed(8);
  // Row counts around the group of four rows and lengths with odd tails.
  for (const auto& [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {7, 128}, {9, 33}, {4, 2}, {13, 1}}) {
    const Tensor x = randn({rows, n}) * 3.0 + 0.5, g = randn({rows, n});
    const Tensor w = randn({n}), b = randn({n});
    const LayerNormReference ref = layer_norm_reference(x.to_vector<float>(), g.to_vector<float>(), w.to_vector<float>(),
                                                        b.to_vector<float>(), rows, n, 1e-5);
    Tensor xr = x.clone(), wr = w.clone(), br = b.clone();
    xr.requires_grad_();
    wr.requires_grad_();
    br.requires_grad_();
    const Tensor y = layer_norm(xr, {n}, wr, br, 1e-5);
    y.backward(g);
    EXPECT_TRUE(bitwise_equal_floats(y.to_vector<float>(), ref.y)) << rows << "x" << n;
    EXPECT_TRUE(bitwise_equal_floats(xr.grad().to_vector<float>(), ref.gx)) << rows << "x" << n;
    EXPECT_TRUE(bitwise_equal_floats(wr.grad().to_vector<float>(), ref.gw)) << rows << "x" << n;
    EXPECT_TRUE(bitwise_equal_floats(br.grad().to_vector<float>(), ref.gb)) << rows << "x" << n;
    // Without weight and bias: weight 1 and bias 0 in the formulas.
    Tensor xn = x.clone();
    xn.requires_grad_();
    const Tensor yn = layer_norm(xn, {n}, Tensor(), Tensor(), 1e-5);
    yn.backward(g);
    const LayerNormReference plain =
        layer_norm_reference(x.to_vector<float>(), g.to_vector<float>(), std::vector<float>(size_t(n), 1.0f),
                             std::vector<float>(size_t(n), 0.0f), rows, n, 1e-5);
    std::vector<float> y_plain = plain.y;  // xhat * 1 + 0 is xhat except for -0
    const std::vector<float> xv = x.to_vector<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const cpu::Moments m = cpu::moments_contiguous(xv.data() + r * n, n);
      const float mean = float(m.mean), rstd = float(1.0 / std::sqrt(m.var + 1e-5));
      for (int64_t j = 0; j < n; ++j) y_plain[size_t(r * n + j)] = (xv[size_t(r * n + j)] - mean) * rstd;
    }
    EXPECT_TRUE(bitwise_equal_floats(yn.to_vector<float>(), y_plain)) << rows << "x" << n;
    EXPECT_TRUE(bitwise_equal_floats(xn.grad().to_vector<float>(), plain.gx)) << rows << "x" << n;
  }
}

TEST(MaskedFillKernel, RepeatingMaskMatchesTheBroadcastPath) {
  manual_seed(4);
  const int64_t B = 3, H = 2, T = 23;
  const Tensor scores = randn({B, H, T, T});
  const Tensor mask = triu(ones({T, T}, TensorOptions(kBool)), 1);
  const Tensor fast = masked_fill(scores, mask, -1.5);
  // The same fill through a strided output: the general (broadcast) path.
  Tensor strided = transpose(zeros({B, H, T, T}), 2, 3);
  strided.copy_(scores);
  strided.masked_fill_(mask, -1.5);
  EXPECT_TRUE(testing::bitwise_equal(fast, strided.contiguous()));
  const std::vector<float> x = scores.to_vector<float>(), got = fast.to_vector<float>();
  for (int64_t i = 0; i < B * H * T * T; ++i) {
    const int64_t r = (i / T) % T, c = i % T;
    EXPECT_EQ(got[size_t(i)], c > r ? -1.5f : x[size_t(i)]) << i;
  }
}

TEST(CopyKernel, SliceAndSelectBackwardTakeStridedGradients) {
  manual_seed(9);
  const int64_t B = 3, T = 5, C = 4;
  Tensor x = randn({B, T, 3 * C});
  x.requires_grad_();
  // A gradient laid out transposed (T has stride 1), as a transposed key's is.
  const Tensor g = transpose(randn({B, C, T}), 1, 2);
  narrow(x, 2, C, C).backward(g);
  const std::vector<float> gx = x.grad().to_vector<float>(), gv = g.contiguous().to_vector<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < 3 * C; ++c) {
        const float want = c >= C && c < 2 * C ? gv[size_t((b * T + t) * C + c - C)] : 0.0f;
        ASSERT_EQ(gx[size_t((b * T + t) * 3 * C + c)], want) << b << " " << t << " " << c;
      }
  Tensor y = randn({B, T, C});
  y.requires_grad_();
  const Tensor gs = transpose(randn({C, B}), 0, 1);  // (B, C) with strides (1, B)
  select(y, 1, 2).backward(gs);
  const std::vector<float> gy = y.grad().to_vector<float>(), gsv = gs.contiguous().to_vector<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(gy[size_t((b * T + t) * C + c)], t == 2 ? gsv[size_t(b * C + c)] : 0.0f);
}

TEST(CopyKernel, StridedCopiesOfEveryLayout) {
  manual_seed(5);
  const Tensor a = randn({4, 5, 6, 7});
  const std::vector<float> v = a.to_vector<float>();
  auto at = [&](int64_t i, int64_t j, int64_t k, int64_t l) { return v[size_t(((i * 5 + j) * 6 + k) * 7 + l)]; };
  // A permutation (inner runs strided on the source) and a transpose of the
  // two last dims, each made contiguous.
  const Tensor p = permute(a, {2, 0, 3, 1}).contiguous();
  const std::vector<float> pv = p.to_vector<float>();
  for (int64_t k = 0; k < 6; ++k)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t l = 0; l < 7; ++l)
        for (int64_t j = 0; j < 5; ++j) ASSERT_EQ(pv[size_t(((k * 4 + i) * 7 + l) * 5 + j)], at(i, j, k, l));
  const std::vector<float> tv = transpose(a, 2, 3).contiguous().to_vector<float>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t l = 0; l < 7; ++l)
        for (int64_t k = 0; k < 6; ++k) ASSERT_EQ(tv[size_t(((i * 5 + j) * 7 + l) * 6 + k)], at(i, j, k, l));
  // Into a strided destination, from a broadcast source, across dtypes.
  Tensor dst = zeros({7, 6});
  Tensor dst_t = transpose(dst, 0, 1);  // (6, 7) view with strides (1, 6)
  dst_t.copy_(arange(7).to(kFloat32));  // broadcast (7) → (6, 7)
  const std::vector<float> dv = dst.to_vector<float>();
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t c = 0; c < 6; ++c) EXPECT_EQ(dv[size_t(r * 6 + c)], float(r));
  const std::vector<int64_t> iv = transpose(a, 0, 3).to(kInt64).to_vector<int64_t>();
  for (int64_t l = 0; l < 7; ++l)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t k = 0; k < 6; ++k)
        for (int64_t i = 0; i < 4; ++i)
          ASSERT_EQ(iv[size_t(((l * 5 + j) * 6 + k) * 4 + i)], int64_t(at(i, j, k, l)));
  const std::vector<double> hv = transpose(a.to(kFloat16), 1, 2).contiguous().to_vector<double>();
  const std::vector<double> h_ref = transpose(a, 1, 2).to(kFloat16).contiguous().to_vector<double>();
  EXPECT_EQ(hv, h_ref);
}

}  // namespace
}  // namespace dtr
