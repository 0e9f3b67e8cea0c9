// scaled_dot_product_attention: values against PyTorch's reference
// definition (the math in the torch.nn.functional.scaled_dot_product_attention
// docs, evaluated with torch on the same inputs), masks, dropout,
// errors and a float64 gradient check of the causal form.
#include <cmath>
#include <string>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

// v[i] = ((i * a) % 17 - 8) / 8, the pattern the references used.
Tensor pat(IntList shape, int64_t a, DType dtype = kFloat64) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i) * a % 17 - 8) / 8.0;
  return from_vector(v, shape).to(dtype);
}

using testing::error_message;

struct Qkv {
  Tensor q = pat({1, 2, 3, 2}, 5), k = pat({1, 2, 4, 2}, 3), v = pat({1, 2, 4, 3}, 7);
};

TEST(Attention, PlainMatchesTorch) {
  Qkv t;
  Tensor y = scaled_dot_product_attention(t.q, t.k, t.v);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 3}));
  EXPECT_TRUE(testing::allclose(
      y, {-0.3070094846911145, -0.15565720859483395, 0.13515359492575735, -0.18781651859876974,
          0.3620137185101097, -0.2684250221163122, -0.2786023905434265, -0.036030373473587285,
          0.01474565921529234, 0.17120189590772641, -0.012416750088702605, -0.20379810409227359,
          0.1473080796078697, -0.039219775880363766, -0.22769192039213032, 0.11491144339639138,
          -0.05717780571518824, -0.26008855660360863},
      1e-12));
  Tensor yf = scaled_dot_product_attention(t.q.to(kFloat32), t.k.to(kFloat32), t.v.to(kFloat32));
  EXPECT_EQ(yf.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(yf, y.to_vector<double>(), 1e-6, 1e-5));
}

TEST(Attention, CausalMatchesTorch) {
  Qkv t;
  // Top-left aligned: query i sees keys 0..i (L = 3, S = 4).
  EXPECT_TRUE(testing::allclose(
      scaled_dot_product_attention(t.q, t.k, t.v, Tensor(), 0.0, /*is_causal=*/true),
      {-1.0, -0.125, 0.75, -0.6775585281366294, 0.1974414718633707, -0.2979347835559547,
       -0.6085093791004417, 0.26649062089955833, -0.03197096789168935, 1.0, -0.25, 0.625,
       0.1605790333563349, 0.008283374351896952, -0.2144209666436651, 0.02737298010248692,
       0.2180780497142778, -0.3476270198975131},
      1e-12));
}

TEST(Attention, BoolMaskKeepsTrue) {
  Qkv t;
  Tensor mask = from_vector(std::vector<bool>{true, false, true, true, false, true, true, false,
                                              true, true, false, true},
                            {3, 4});
  EXPECT_TRUE(testing::allclose(
      scaled_dot_product_attention(t.q, t.k, t.v, mask),
      {-0.2630668100294944, -0.2764843748252807, 0.3651589436810743, -0.17755852813662934,
       0.6974414718633708, -0.5525585281366293, -0.332495054760444, -0.21225949309222553,
       0.09013780463500602, 0.3965155749899039, -0.08667691414905823, 0.021515574989903946,
       -0.3901730756786426, 0.4848269243213573, -0.7651730756786426, 0.1723483777245599,
       -0.25042335482981537, -0.20265162227544012},
      1e-12));
}

TEST(Attention, FloatMaskAndScale) {
  Qkv t;
  EXPECT_TRUE(testing::allclose(
      scaled_dot_product_attention(t.q, t.k, t.v, pat({3, 4}, 11), 0.0, false, 0.3),
      {0.08866964919358084, -0.2866948223024628, -0.10815772914084658, -0.14994322871718652,
       0.37751845019828556, -0.14739910894557492, -0.3409234119737923, 0.2610108149646568,
       -0.39916157355996995, 0.08301395855619835, -0.3033496899484968, -0.29198604144380164,
       0.19076334390190813, 0.11063218611466313, -0.18423665609809184, -0.2045398246625627,
       0.16763660614422093, -0.5795398246625626},
      1e-12));
}

TEST(Attention, DropoutIsTheComposedDropout) {
  Qkv t;
  const RngState s{5, 64};
  set_rng_state(s);
  Tensor y = scaled_dot_product_attention(t.q, t.k, t.v, Tensor(), 0.5, true);
  set_rng_state(s);
  Tensor scores = mul(matmul(t.q, transpose(t.k, -2, -1)), 1.0 / std::sqrt(2.0));
  scores = masked_fill(scores, triu(ones({3, 4}, kBool), 1), -INFINITY);
  Tensor expect = matmul(dropout(softmax(scores, -1), 0.5), t.v);
  EXPECT_TRUE(testing::bitwise_equal(y, expect));
  // And it differs from the dropout-free result.
  EXPECT_FALSE(testing::bitwise_equal(y, scaled_dot_product_attention(t.q, t.k, t.v, Tensor(), 0.0, true)));
}

TEST(Attention, GradcheckCausal) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true);
      },
      {testing::leaf({2, 3, 2}, 1), testing::leaf({2, 3, 2}, 2), testing::leaf({2, 3, 4}, 3)}));
}

TEST(Attention, GradcheckFloatMask) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], x[3]);
      },
      {testing::leaf({1, 3, 2}, 4), testing::leaf({1, 4, 2}, 5), testing::leaf({1, 4, 2}, 6),
       testing::leaf({3, 4}, 7)}));
}

TEST(Attention, ErrorsNameOp) {
  Qkv t;
  const std::string msg =
      error_message([&] { scaled_dot_product_attention(t.q, pat({1, 2, 4, 3}, 3), t.v); });
  EXPECT_NE(msg.find("scaled_dot_product_attention"), std::string::npos) << msg;
  EXPECT_THROW(scaled_dot_product_attention(t.q, pat({1, 2, 4, 3}, 3), t.v), ValueError);
  EXPECT_THROW(scaled_dot_product_attention(t.q, t.k, pat({1, 2, 5, 3}, 7)), ValueError);
  EXPECT_THROW(scaled_dot_product_attention(pat({3}, 1), t.k, t.v), ValueError);
  EXPECT_THROW(scaled_dot_product_attention(t.q, t.k, t.v, ones({3, 4}, kBool), 0.0, true),
               ValueError);
  EXPECT_THROW(scaled_dot_product_attention(t.q, t.k, t.v, Tensor(), 1.5), ValueError);
  EXPECT_THROW(scaled_dot_product_attention(t.q, t.k.to(kFloat32), t.v), TypeError);
  EXPECT_THROW(scaled_dot_product_attention(t.q, t.k, t.v, ones({3, 4}, kInt64)), TypeError);
}


// The fused rows (no mask, no dropout) against the composite, which an
// all-true bool mask selects: several query blocks (L > 64), L != S, causal
// and not, float64 and float32, forward and every input's gradient.
struct FusedCase {
  Shape q, k, v;
  bool causal;
};

std::vector<Tensor> attention_and_grads(const FusedCase& c, DType dtype, bool composite) {
  const Tensor q = testing::leaf(c.q, 11).to(dtype).detach().requires_grad_(true);
  const Tensor k = testing::leaf(c.k, 12).to(dtype).detach().requires_grad_(true);
  const Tensor v = testing::leaf(c.v, 13).to(dtype).detach().requires_grad_(true);
  const int64_t L = c.q[c.q.size() - 2], S = c.k[c.k.size() - 2];
  Tensor mask;
  if (composite) mask = c.causal ? tril(ones({L, S}, kBool)) : ones({L, S}, kBool);
  const Tensor y = scaled_dot_product_attention(q, k, v, mask, 0.0, composite ? false : c.causal);
  const Tensor w = testing::leaf(y.shape(), 14).to(dtype);
  sum(mul(y, w)).backward();
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(Attention, FusedMatchesTheComposite) {
  const std::vector<FusedCase> cases = {
      {{2, 3, 150, 8}, {2, 3, 150, 8}, {2, 3, 150, 5}, true},
      {{2, 3, 150, 8}, {2, 3, 150, 8}, {2, 3, 150, 5}, false},
      {{4, 70, 6}, {4, 90, 6}, {4, 90, 4}, false},
      {{4, 90, 6}, {4, 70, 6}, {4, 70, 4}, true},  // rows past S see every key
      {{5, 3}, {7, 3}, {7, 2}, true},
  };
  for (const FusedCase& c : cases) {
    for (DType dtype : {kFloat64, kFloat32}) {
      const std::vector<Tensor> fused = attention_and_grads(c, dtype, false);
      const std::vector<Tensor> ref = attention_and_grads(c, dtype, true);
      const double tol = dtype == kFloat64 ? 1e-12 : 2e-5;
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(fused[i].defined()) << i;
        EXPECT_EQ(fused[i].shape(), ref[i].shape()) << i;
        EXPECT_TRUE(testing::allclose(fused[i], ref[i].to(kFloat64).to_vector<double>(), tol, tol))
            << "output " << i << " of q " << shape_str(c.q) << (c.causal ? " causal " : " ") << dtype_name(dtype);
      }
    }
  }
}

TEST(Attention, FusedUnderBf16AutocastRunsInBf16) {
  const Tensor q = testing::leaf({2, 80, 8}, 1).to(kFloat32), k = testing::leaf({2, 80, 8}, 2).to(kFloat32),
               v = testing::leaf({2, 80, 8}, 3).to(kFloat32);
  Tensor y;
  {
    AutocastGuard ac(kBFloat16);
    y = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  const Tensor ref = scaled_dot_product_attention(q.to(kBFloat16).to(kFloat32), k.to(kBFloat16).to(kFloat32),
                                                  v.to(kBFloat16).to(kFloat32), Tensor(), 0.0, true);
  EXPECT_TRUE(testing::allclose(y.to(kFloat32), ref.to(kFloat64).to_vector<double>(), 1e-2, 1e-2));
}

TEST(Attention, GradcheckFusedSeveralBlocks) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true);
      },
      {testing::leaf({1, 66, 2}, 21), testing::leaf({1, 66, 2}, 22), testing::leaf({1, 66, 2}, 23)}));
}

// The point of the fused rows: forward and backward of a (N, L, L) attention
// never hold an (N, L, L) tensor. Storage peak of one forward and backward
// against the bytes of one score matrix.
TEST(Attention, FusedNeverHoldsTheScores) {
  const int64_t N = 8, L = 256, E = 16;
  const Tensor q = randn({N, L, E}).requires_grad_(true), k = randn({N, L, E}).requires_grad_(true),
               v = randn({N, L, E}).requires_grad_(true);
  remat::reset_stats();
  const int64_t before = remat::stats().resident_bytes;
  sum(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true)).backward();
  const int64_t scores_bytes = N * L * L * int64_t(sizeof(float));
  EXPECT_LT(remat::stats().peak_bytes - before, scores_bytes / 2);  // q, k, v, out and their gradients
  // The composite (an all-true mask) does hold them.
  remat::reset_stats();
  const int64_t before2 = remat::stats().resident_bytes;
  sum(scaled_dot_product_attention(q, k, v, ones({L, L}, kBool))).backward();
  EXPECT_GT(remat::stats().peak_bytes - before2, scores_bytes);
}

}  // namespace
}  // namespace dtr
