// Tensor::register_post_accumulate_grad_hook (PyTorch 2.1) and
// autograd::queue_callback: a hook fires once per leaf per backward call,
// after the gradients of all the leaf's uses were summed into .grad (a weight
// used twice, tied weights, a leaf that is a root, a checkpoint region whose
// recomputation runs a nested backward); handles remove hooks; callbacks run
// FIFO at the end of the outermost backward, may queue more, and are dropped
// when backward throws; errors are typed.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

using testing::allclose;
using testing::error_message;
using testing::leaf;

/// Counts a leaf's hook calls and records its .grad as each call saw it.
struct HookLog {
  int calls = 0;
  std::vector<std::vector<double>> grads;
  RemovableHandle attach(Tensor& t) {
    return t.register_post_accumulate_grad_hook([this](Tensor& p) {
      ++calls;
      EXPECT_FALSE(is_grad_enabled());
      grads.push_back(p.grad().to_vector<double>());
    });
  }
};

TEST(PostAccumulateGradHook, FiresOnceAfterTheSumOfAWeightUsedTwice) {
  Tensor w = leaf({3}, 1);
  Tensor x = leaf({3}, 2);
  HookLog log;
  log.attach(w);
  // w used twice: d/dw sum(w*x + w*w) = x + 2w.
  Tensor loss = (w * x + w * w).sum();
  loss.backward();
  ASSERT_EQ(log.calls, 1);
  const auto wv = w.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> expected;
  for (size_t i = 0; i < 3; ++i) expected.push_back(xv[i] + 2 * wv[i]);
  EXPECT_TRUE(allclose(w.grad(), expected));
  ASSERT_EQ(log.grads.size(), 1u);
  EXPECT_EQ(log.grads[0], w.grad().to_vector<double>());  // the hook saw the final sum
  // A second backward accumulates and fires again, once.
  (w * x).sum().backward();
  EXPECT_EQ(log.calls, 2);
  EXPECT_EQ(log.grads[1], w.grad().to_vector<double>());
}

TEST(PostAccumulateGradHook, TiedWeightsFireOncePerBackward) {
  // One parameter registered in two modules (tied embedding and output
  // weights): one leaf, one accumulator, one hook call.
  auto a = nn::Linear(4, 4, /*bias=*/false);
  auto b = nn::Linear(4, 4, /*bias=*/false);
  b->weight = a->weight;
  Tensor w = a->weight;
  HookLog log;
  log.attach(w);
  Tensor x = randn({2, 4});
  Tensor y = matmul(matmul(x, w.t()), b->weight.t());
  y.sum().backward();
  EXPECT_EQ(log.calls, 1);
  EXPECT_TRUE(w.grad().defined());
}

TEST(PostAccumulateGradHook, FiresWhenTheLeafIsARootAndInLeafOrder) {
  Tensor w = leaf({2}, 3);
  HookLog log;
  log.attach(w);
  w.backward(ones({2}, kFloat64));
  EXPECT_EQ(log.calls, 1);
  EXPECT_TRUE(allclose(w.grad(), {1, 1}));
  // Several hooks on one leaf run in registration order.
  std::string order;
  Tensor v = leaf({2}, 4);
  v.register_post_accumulate_grad_hook([&](Tensor&) { order += "a"; });
  v.register_post_accumulate_grad_hook([&](Tensor&) { order += "b"; });
  (v * 2.0).sum().backward();
  EXPECT_EQ(order, "ab");
}

TEST(PostAccumulateGradHook, MayChangeTheGradAndIsRemovable) {
  Tensor w = leaf({2}, 5);
  RemovableHandle h = w.register_post_accumulate_grad_hook([](Tensor& p) { p.grad().mul_(10.0); });
  (w * 1.0).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {10, 10}));
  h.remove();
  h.remove();  // twice: nothing
  (w * 1.0).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {11, 11}));
  // A hook that removes itself while running.
  int calls = 0;
  RemovableHandle self;
  self = w.register_post_accumulate_grad_hook([&](Tensor&) {
    ++calls;
    self.remove();
  });
  (w * 1.0).sum().backward();
  (w * 1.0).sum().backward();
  EXPECT_EQ(calls, 1);
}

TEST(PostAccumulateGradHook, NoCallForALeafBackwardDoesNotReach) {
  Tensor w = leaf({2}, 6), u = leaf({2}, 7);
  HookLog lw, lu;
  lw.attach(w);
  lu.attach(u);
  (w * 3.0).sum().backward();
  EXPECT_EQ(lw.calls, 1);
  EXPECT_EQ(lu.calls, 0);
  EXPECT_FALSE(u.grad().defined());
}

TEST(PostAccumulateGradHook, CheckpointedRegionFiresOnceFromItsNestedBackward) {
  auto lin = nn::Linear(4, 4);
  HookLog lw, lb;
  Tensor w = lin->weight, b = lin->bias;
  lw.attach(w);
  lb.attach(b);
  Tensor x = randn({3, 4}).requires_grad_();
  int final_calls = 0;
  // A callback queued from inside the nested backward runs once, at the end
  // of the outer backward (after every hook).
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([&] {
      ++final_calls;
      EXPECT_EQ(lw.calls, 1);
      EXPECT_EQ(lb.calls, 1);
    });
  });
  Tensor h = checkpoint([&](const Tensor& v) { return relu(lin->forward(v)); }, x);
  Tensor loss = (h * h).sum();
  loss.backward();
  EXPECT_EQ(lw.calls, 1);
  EXPECT_EQ(lb.calls, 1);
  EXPECT_EQ(final_calls, 1);
  // The grads equal those of the region run without checkpointing.
  Tensor w2 = w.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_();
  Tensor h2 = relu(linear(x.detach(), w2, b2));
  (h2 * h2).sum().backward();
  EXPECT_TRUE(testing::bitwise_equal(w.grad(), w2.grad()));
  EXPECT_TRUE(testing::bitwise_equal(b.grad(), b2.grad()));
}

TEST(PostAccumulateGradHook, Errors) {
  Tensor plain = ones({2});
  EXPECT_NE(error_message<ValueError>([&] {
              plain.register_post_accumulate_grad_hook([](Tensor&) {});
            }).find("doesn't require gradient"),
            std::string::npos);
  Tensor w = leaf({2}, 8);
  Tensor y = w * 2.0;
  EXPECT_NE(error_message<ValueError>([&] {
              y.register_post_accumulate_grad_hook([](Tensor&) {});
            }).find("non-leaf"),
            std::string::npos);
  EXPECT_FALSE(error_message<ValueError>([&] {
                 w.register_post_accumulate_grad_hook(nullptr);
               }).empty());
  Tensor undefined;
  EXPECT_FALSE(error_message<ValueError>([&] {
                 undefined.register_post_accumulate_grad_hook([](Tensor&) {});
               }).empty());
  // A hook's exception leaves backward; the next backward works.
  RemovableHandle h = w.register_post_accumulate_grad_hook([](Tensor&) { throw TypeError("boom"); });
  EXPECT_EQ(error_message<TypeError>([&] { (w * 2.0).sum().backward(); }), "boom");
  h.remove();
  (w * 2.0).sum().backward();
}

TEST(QueueCallback, RunsFifoAtTheEndAndMayQueueMore) {
  Tensor w = leaf({2}, 9);
  std::string order;
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    EXPECT_TRUE(autograd::in_backward());
    autograd::queue_callback([&] {
      order += "1";
      EXPECT_TRUE(w.grad().defined());
      EXPECT_TRUE(autograd::in_backward());
      autograd::queue_callback([&] { order += "3"; });
    });
    autograd::queue_callback([&] { order += "2"; });
    order += "h";
  });
  (w * 2.0).sum().backward();
  EXPECT_EQ(order, "h123");
  EXPECT_FALSE(autograd::in_backward());
  // Nothing is left queued for the next backward.
  order.clear();
  Tensor v = leaf({2}, 10);
  (v * 2.0).sum().backward();
  EXPECT_EQ(order, "");
}

TEST(QueueCallback, OutsideBackwardIsAValueError) {
  EXPECT_NE(error_message<ValueError>([] { autograd::queue_callback([] {}); })
                .find("during the backward pass"),
            std::string::npos);
}

TEST(QueueCallback, DroppedWhenBackwardThrows) {
  Tensor w = leaf({2}, 11), u = leaf({2}, 12);
  int ran = 0;
  // w's accumulator runs first (created later), queues, then u's hook throws.
  u.register_post_accumulate_grad_hook([](Tensor&) { throw ValueError("u failed"); });
  Tensor lu = (u * 1.0).sum();
  w.register_post_accumulate_grad_hook([&](Tensor&) { autograd::queue_callback([&] { ++ran; }); });
  Tensor lw = (w * 1.0).sum();
  EXPECT_EQ(error_message<ValueError>([&] { (lw + lu).backward(); }), "u failed");
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(autograd::in_backward());
  // The dropped callback does not run at the next backward either.
  Tensor v = leaf({2}, 13);
  (v * 1.0).sum().backward();
  EXPECT_EQ(ran, 0);
  // A throwing callback drops the rest too.
  int after = 0;
  Tensor z = leaf({2}, 14);
  z.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([] { throw IndexError("cb"); });
    autograd::queue_callback([&] { ++after; });
  });
  EXPECT_EQ(error_message<IndexError>([&] { (z * 1.0).sum().backward(); }), "cb");
  EXPECT_EQ(after, 0);
  (v * 1.0).sum().backward();
  EXPECT_EQ(after, 0);
}

}  // namespace
}  // namespace dtr
