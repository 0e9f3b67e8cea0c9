// matmul and linear: values against PyTorch (torch.matmul,
// torch.nn.functional.linear on the same inputs), shape/dtype errors,
// float64 gradient checks, lower precision, autocast and determinism.
#include <string>

#include "core/parallel.h"
#include "dtr/dtr.h"
#include "eager/dispatch.h"
#include "tests/testing.h"

namespace dtr {
namespace {

// Exactly representable test values: v[i] = ((i * a) % 17 - 8) / 8. The
// PyTorch references below were computed on the same pattern.
Tensor pat(IntList shape, int64_t a, DType dtype = kFloat64) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i) * a % 17 - 8) / 8.0;
  return from_vector(v, shape).to(dtype);
}

// sum_k a[i, k] * b[k, j] in double, for 2-D tensors.
std::vector<double> naive_mm(const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> out(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) out[size_t(i * N + j)] += av[size_t(i * K + k)] * bv[size_t(k * N + j)];
  return out;
}

using testing::error_message;

TEST(Matmul, TwoByTwoValues) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {3, 2});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  EXPECT_EQ(c.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(c, {58, 64, 139, 154}));
  EXPECT_TRUE(testing::allclose(a.matmul(b), {58, 64, 139, 154}));
}

TEST(Matmul, OneDimensionalOperands) {
  Tensor v = from_vector(std::vector<double>{1, 2, 3});
  Tensor m = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor dot = matmul(v, v);
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_EQ(dot.item<double>(), 14.0);
  Tensor mv = matmul(m, v);  // (2, 3) @ (3) → (2)
  EXPECT_EQ(mv.shape(), (Shape{2}));
  EXPECT_TRUE(testing::allclose(mv, {14, 32}));
  Tensor vm = matmul(from_vector(std::vector<double>{1, -1}), m);  // (2) @ (2, 3) → (3)
  EXPECT_EQ(vm.shape(), (Shape{3}));
  EXPECT_TRUE(testing::allclose(vm, {-3, -3, -3}));
}

TEST(Matmul, BatchedBroadcastMatchesTorch) {
  // torch.matmul(pat((2,1,2,3),5), pat((3,3,2),3))
  Tensor c = matmul(pat({2, 1, 2, 3}, 5), pat({3, 3, 2}, 3));
  EXPECT_EQ(c.shape(), (Shape{2, 3, 2, 2}));
  EXPECT_TRUE(testing::allclose(
      c, {1.21875, 0.796875, -0.71875, -0.625, 1.078125, 0.65625, -0.6875, -0.59375, 0.9375,
          -0.015625, -0.65625, -0.5625, -0.53125, -0.71875, -0.875, -0.546875, -0.59375, -0.78125,
          -0.765625, -0.4375, -0.65625, -0.3125, -0.65625, 0.734375},
      1e-12));
  // float32 takes the same path through sgemm.
  EXPECT_TRUE(testing::allclose(matmul(pat({2, 1, 2, 3}, 5, kFloat32), pat({3, 3, 2}, 3, kFloat32)),
                                c.to_vector<double>(), 1e-6));
}

TEST(Matmul, VectorWithBatchedMatrix) {
  // torch.matmul(pat((3,),7), pat((4,3,2),3)) and torch.matmul(pat((2,3,4),5), pat((4,),7))
  Tensor vb = matmul(pat({3}, 7), pat({4, 3, 2}, 3));
  EXPECT_EQ(vb.shape(), (Shape{4, 2}));
  EXPECT_TRUE(testing::allclose(
      vb, {1.40625, 1.265625, 1.359375, 1.21875, 1.3125, -0.421875, 1.265625, -0.46875}, 1e-12));
  Tensor bv = matmul(pat({2, 3, 4}, 5), pat({4}, 7));
  EXPECT_EQ(bv.shape(), (Shape{2, 3}));
  EXPECT_TRUE(testing::allclose(bv, {0.796875, 1.53125, 1.203125, -0.71875, -0.78125, -1.109375},
                                1e-12));
}

TEST(Matmul, StridedOperandsMatchContiguous) {
  // Transposed views go to BLAS as transposed operands; an expanded view is
  // packed. Either way the values are those of the contiguous product.
  Tensor a = pat({5, 4}, 5), b = pat({3, 4}, 3);
  const std::vector<double> expect = naive_mm(a, contiguous(transpose(b, 0, 1)));
  EXPECT_TRUE(testing::allclose(matmul(a, transpose(b, 0, 1)), expect, 1e-12));
  EXPECT_TRUE(testing::allclose(matmul(transpose(transpose(a, 0, 1), 0, 1), transpose(b, 0, 1)),
                                expect, 1e-12));
  Tensor at = contiguous(transpose(a, 0, 1));  // (4, 5)
  EXPECT_TRUE(testing::allclose(matmul(transpose(at, 0, 1), transpose(b, 0, 1)), expect, 1e-12));
  Tensor row = pat({1, 4}, 7);
  Tensor expanded = expand(row, {3, 4});  // row stride 0
  EXPECT_TRUE(testing::allclose(matmul(expanded, pat({4, 2}, 3)),
                                naive_mm(contiguous(expanded), pat({4, 2}, 3)), 1e-12));
}

TEST(Matmul, LargerProductMatchesNaiveReference) {
  manual_seed(3);
  Tensor a = randn({37, 53}), b = randn({53, 29});
  EXPECT_TRUE(testing::allclose(matmul(a, b), naive_mm(a, b), 1e-4, 1e-4));
  Tensor ad = a.to(kFloat64), bd = b.to(kFloat64);
  EXPECT_TRUE(testing::allclose(matmul(ad, bd), naive_mm(ad, bd), 1e-12, 1e-12));
}

TEST(Matmul, IntegerOperands) {
  Tensor a = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<int64_t>{1, 0, -1, 2, 3, 1}, {3, 2});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{8, 7, 17, 16}));
}

TEST(Matmul, LowerPrecisionRoundsFloat32Result) {
  // torch: (pat((3,4),5).bfloat16() @ pat((4,2),3).bfloat16())
  Tensor c = matmul(pat({3, 4}, 5, kBFloat16), pat({4, 2}, 3, kBFloat16));
  EXPECT_EQ(c.dtype(), kBFloat16);
  EXPECT_TRUE(testing::allclose(c, {0.453125, 0.359375, 1.703125, 1.375, 1.09375, 1.328125}, 0));
  // float16: the float32 product rounded once to float16.
  manual_seed(5);
  Tensor a = randn({6, 7}), b = randn({7, 3});
  Tensor h = matmul(a.to(kFloat16), b.to(kFloat16));
  EXPECT_EQ(h.dtype(), kFloat16);
  Tensor ref = matmul(a.to(kFloat16).to(kFloat32), b.to(kFloat16).to(kFloat32)).to(kFloat16);
  EXPECT_TRUE(testing::bitwise_equal(h, ref));
}

TEST(Matmul, EmptyDimensions) {
  // K = 0 gives zeros (an empty sum); M = 0 or a zero batch gives an empty result.
  Tensor z = matmul(ones({2, 0}), ones({0, 3}));
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_TRUE(testing::allclose(z, std::vector<double>(6, 0.0), 0));
  EXPECT_EQ(matmul(ones({0, 4}), ones({4, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(matmul(ones({0, 2, 4}), ones({4, 3})).shape(), (Shape{0, 2, 3}));
  EXPECT_TRUE(testing::allclose(linear(ones({2, 0}), ones({3, 0}), ones({3})), std::vector<double>(6, 1.0), 0));
}

TEST(Matmul, ShapeErrorsNameOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  EXPECT_THROW(matmul(a, b), ValueError);
  const std::string msg = error_message([&] { matmul(a, b); });
  EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 5]"), std::string::npos) << msg;
  EXPECT_THROW(matmul(zeros({}), zeros({2})), ValueError);
  EXPECT_THROW(matmul(zeros({3}), zeros({4})), ValueError);
  const std::string bmsg = error_message([] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); });
  EXPECT_NE(bmsg.find("matmul"), std::string::npos) << bmsg;
  EXPECT_NE(bmsg.find("[2, 2, 3]"), std::string::npos) << bmsg;
  EXPECT_THROW(matmul(zeros({2, 2, 3}), zeros({3, 3, 4})), ValueError);
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({3, 2}, kFloat64)), TypeError);
  EXPECT_THROW(matmul(zeros({2, 3}, kBool), zeros({3, 2}, kBool)), TypeError);
}

TEST(Matmul, GradcheckTwoDimensional) {
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                                 {testing::leaf({3, 4}, 1), testing::leaf({4, 2}, 2)}));
}

TEST(Matmul, GradcheckBatchedBroadcast) {
  // Batch dims (2, 1) and (3) broadcast to (2, 3): gradients sum over them.
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                                 {testing::leaf({2, 1, 2, 3}, 3), testing::leaf({3, 3, 2}, 4)}));
  // 2-D @ batched and batched @ 2-D (the folded single-GEMM path).
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                                 {testing::leaf({2, 3}, 5), testing::leaf({4, 3, 2}, 6)}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
                                 {testing::leaf({2, 4, 3}, 7), testing::leaf({3, 2}, 8)}));
}

TEST(Matmul, GradcheckOneDimensional) {
  auto mm = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  EXPECT_TRUE(testing::gradcheck(mm, {testing::leaf({3}, 1), testing::leaf({3}, 2)}));
  EXPECT_TRUE(testing::gradcheck(mm, {testing::leaf({3}, 3), testing::leaf({2, 3, 4}, 4)}));
  EXPECT_TRUE(testing::gradcheck(mm, {testing::leaf({2, 2, 3}, 5), testing::leaf({3}, 6)}));
}

TEST(Matmul, GradientValuesOfSum) {
  // d/da sum(a @ b) = ones @ b^T: every row of grad_a is b's row sums.
  Tensor a = testing::leaf({2, 3}, 1);
  Tensor b = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2});
  sum(matmul(a, b)).backward();
  EXPECT_TRUE(testing::allclose(a.grad(), {3, 7, 11, 3, 7, 11}));
}

TEST(Matmul, AutocastRunsInLowerPrecision) {
  Tensor a = pat({3, 4}, 5, kFloat32), b = pat({4, 2}, 3, kFloat32);
  {
    AutocastGuard guard(kBFloat16);
    Tensor c = matmul(a, b);
    EXPECT_EQ(c.dtype(), kBFloat16);
    EXPECT_TRUE(testing::allclose(c, {0.453125, 0.359375, 1.703125, 1.375, 1.09375, 1.328125}, 0));
    EXPECT_EQ(linear(a, transpose(b, 0, 1)).dtype(), kBFloat16);
  }
  EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
}

TEST(Matmul, SameBitsForAnyThreadCount) {
  // A batch of small GEMMs and one GEMM large enough for OpenBLAS to thread.
  manual_seed(11);
  Tensor a = randn({64, 8, 9}), b = randn({64, 9, 7});
  Tensor big_a = randn({130, 170}), big_b = randn({170, 150});
  const int before = num_threads();
  set_num_threads(1);
  Tensor small1 = matmul(a, b), big1 = matmul(big_a, big_b);
  set_num_threads(std::max(2, before));
  Tensor small2 = matmul(a, b), big2 = matmul(big_a, big_b);
  set_num_threads(before);
  EXPECT_TRUE(testing::bitwise_equal(small1, small2));
  EXPECT_TRUE(testing::bitwise_equal(big1, big2));
}

TEST(Matmul, CostIsTwoMNK) {
  const OpDef& o = op("matmul");
  std::vector<TensorMeta> in(2), out(1);
  in[0].shape = {5, 2, 3};
  in[1].shape = {3, 4};
  out[0].shape = {5, 2, 4};
  EXPECT_DOUBLE_EQ(o.estimate(in, out, Attrs{}).flops, 2.0 * 5 * 2 * 4 * 3);
  EXPECT_EQ(o.autocast, AutocastPolicy::kLowerPrecision);
  EXPECT_EQ(op("linear").autocast, AutocastPolicy::kLowerPrecision);
}

TEST(Linear, ValuesMatchTorch) {
  // torch.nn.functional.linear(pat((2,3,4),5), pat((5,4),3), pat((5,),7))
  Tensor x = pat({2, 3, 4}, 5), w = pat({5, 4}, 3), b = pat({5}, 7);
  Tensor y = linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
  EXPECT_TRUE(testing::allclose(
      y, {0.28125, -1.609375, 1.8125, 0.71875, -0.375, -0.640625, -0.546875, 0.34375, -0.359375,
          -0.265625, -1.296875, -0.546875, 1.0, -0.640625, -0.6875, -1.421875, 1.3125, 0.328125,
          -0.921875, 0.21875, -0.75, -0.546875, 0.453125, -0.40625, 1.921875, -1.40625, -0.546875,
          1.109375, -0.6875, 1.5},
      1e-12));
  Tensor y0 = linear(x.to(kFloat32), w.to(kFloat32));
  EXPECT_EQ(y0.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(
      y0, {1.28125, -1.484375, 1.0625, 1.21875, -0.75, 0.359375, -0.421875, -0.40625, 0.140625,
           -0.640625, -0.296875, -0.421875, 0.25, -0.140625, -1.0625, -0.421875, 1.4375, -0.421875,
           -0.421875, -0.15625, 0.25, -0.421875, -0.296875, 0.09375, 1.546875, -0.40625, -0.421875,
           0.359375, -0.1875, 1.125},
      1e-6));
  // A 1-D input gives a 1-D output.
  EXPECT_EQ(linear(pat({4}, 5), w, b).shape(), (Shape{5}));
}

TEST(Linear, ErrorsNameOpAndShapes) {
  const std::string msg = error_message([] { linear(zeros({2, 3}), zeros({5, 4})); });
  EXPECT_NE(msg.find("linear"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[5, 4]"), std::string::npos) << msg;
  EXPECT_THROW(linear(zeros({2, 3}), zeros({5, 4})), ValueError);
  EXPECT_THROW(linear(zeros({2, 4}), zeros({5, 4}), zeros({4})), ValueError);
  EXPECT_THROW(linear(zeros({2, 4}), zeros({5, 4, 1})), ValueError);
  EXPECT_THROW(linear(zeros({2, 4}), zeros({5, 4}, kFloat64)), TypeError);
  EXPECT_THROW(linear(zeros({2, 4}, kInt64), zeros({5, 4}, kInt64)), TypeError);
}

TEST(Linear, GradcheckWithAndWithoutBias) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) { return linear(x[0], x[1], x[2]); },
      {testing::leaf({2, 3, 4}, 1), testing::leaf({5, 4}, 2), testing::leaf({5}, 3)}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& x) { return linear(x[0], x[1]); },
                                 {testing::leaf({3, 4}, 4), testing::leaf({2, 4}, 5)}));
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) { return linear(x[0], x[1], x[2]); },
      {testing::leaf({4}, 6), testing::leaf({3, 4}, 7), testing::leaf({3}, 8)}));
}

}  // namespace
}  // namespace dtr
