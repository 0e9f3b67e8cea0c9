// Writes that reach a storage outside the op path (data_ptr) and in-place
// writes that leave other tensors on the same storage behind (views taken
// before the write). Note [mutation], Note [views and in-place writes].
#include <optional>

#include "tests/testing.h"

namespace dtr {
namespace {

using dtr::testing::allclose;
using dtr::testing::BudgetScope;
using dtr::testing::churn;

Tensor filled_through_data_ptr(Tensor x) {
  float* p = x.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = float(i);
  return x;
}

// The reproducer: x = empty / zeros / randn, filled through data_ptr, kept
// under a budget while temporaries come and go. Before, x was evicted and
// rebuilt from its creation lineage (zeros), losing the writes.
TEST(Mutation, DataPtrWritesSurviveEviction) {
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind);
    Tensor x = kind == 0 ? empty({65536}) : kind == 1 ? zeros({65536}) : randn({65536});
    filled_through_data_ptr(x);
    const double expected = 65535.0 * 65536.0 / 2.0;  // 2147450880
    EXPECT_EQ(x.sum().item<double>(), expected);
    const int64_t evictions_before = remat::stats().evictions;
    {
      BudgetScope budget(int64_t(1) << 20);
      churn();
      EXPECT_GT(remat::stats().evictions, evictions_before);
      EXPECT_EQ(x.sum().item<double>(), expected);
    }
  }
}

// A tensor computed from x before the write keeps the value it had: its
// lineage reads the old bytes (kept as an older version), not the new ones.
TEST(Mutation, DataPtrKeepsWhatEarlierLineageRead) {
  Tensor x = zeros({65536});
  Tensor y = x + 1.0;  // evictable, lineage reads x's zeros
  filled_through_data_ptr(x);
  {
    BudgetScope budget(int64_t(1) << 20);
    churn();
    EXPECT_EQ(y.sum().item<double>(), 65536.0);
    EXPECT_EQ(x.sum().item<double>(), 65535.0 * 65536.0 / 2.0);
  }
}

// A write through data_ptr bumps the version: a tensor saved for backward
// reports it, as after an in-place op.
TEST(Mutation, DataPtrBumpsVersionSeenByBackward) {
  Tensor w = from_vector<float>({1, 2, 3}).requires_grad_();
  Tensor h = w * 2.0;
  Tensor y = h * h;  // saves h
  const uint64_t v0 = h.storage()->version;
  h.data_ptr<float>()[0] = 5;
  EXPECT_EQ(h.storage()->version, v0 + 1);
  EXPECT_THROW(y.sum().backward(), Error);
}

// const_data_ptr is a read: no new version, the storage stays evictable,
// and its lineage is kept.
TEST(Mutation, ConstDataPtrIsNotAMutation) {
  Tensor x = randn({65536});
  Tensor y = x * 3.0;
  const float* p = y.const_data_ptr<float>();
  const float first = p[0];
  EXPECT_EQ(y.storage()->version, 0u);
  EXPECT_NE(remat::producer(*y.storage()), nullptr);
  EXPECT_FALSE(remat::is_constant(*y.storage()));
  const void* raw = y.const_data_ptr();
  EXPECT_EQ(raw, static_cast<const void*>(p));
  EXPECT_THROW((void)y.const_data_ptr<double>(), TypeError);
  {
    BudgetScope budget(int64_t(1) << 20);
    const int64_t evictions_before = remat::stats().evictions;
    churn();
    EXPECT_GT(remat::stats().evictions, evictions_before);
    EXPECT_FALSE(y.storage()->resident());  // evicted: the read pinned nothing
    EXPECT_EQ(y.to_vector<float>()[0], first);
  }
}

// A mutable pointer on a view makes the whole storage (base and views) a constant.
TEST(Mutation, DataPtrOnAViewWritesTheBase) {
  Tensor x = zeros({4, 16384});
  Tensor row = x.select(0, 2);
  float* p = row.data_ptr<float>();
  for (int64_t i = 0; i < row.numel(); ++i) p[i] = 1;
  {
    BudgetScope budget(int64_t(1) << 20);
    churn();
    EXPECT_EQ(x.sum().item<double>(), 16384.0);
    EXPECT_EQ(x.select(0, 2).sum().item<double>(), 16384.0);
  }
  EXPECT_EQ(row.mutable_data_ptr<float>(), p);
}

// ---- a view taken before an in-place write to its base --------------------
// The view regenerates its history from the base (PyTorch's answers, 1.13).

TEST(ViewBeforeWrite, ViewOfBaseWrittenInPlaceSeesTheWrite) {
  for (int c = 0; c < 3; ++c) {
    SCOPED_TRACE(c);
    Tensor w = from_vector<float>({-1, 2, -3, 4}).requires_grad_();
    Tensor h = w * 1.0;
    Tensor v = c == 2 ? h.slice(0, 0, 2) : h.view({2, 2});
    if (c == 0) h.relu_();
    else h.mul_(3);
    v.sum().backward(Tensor(), /*retain_graph=*/true);
    EXPECT_TRUE(allclose(w.grad(), c == 0   ? std::vector<double>{0, 1, 0, 1}
                                   : c == 1 ? std::vector<double>{3, 3, 3, 3}
                                            : std::vector<double>{3, 3, 0, 0}));
    EXPECT_EQ(v.grad_fn_name(), "AsStridedBackward");
    // Backward from the base itself goes through the write too.
    w.set_grad(Tensor());
    h.sum().backward();
    EXPECT_TRUE(allclose(w.grad(), c == 0 ? std::vector<double>{0, 1, 0, 1}
                                           : std::vector<double>{3, 3, 3, 3}));
  }
}

// The stale view as a root of backward, or as the target of a write.
TEST(ViewBeforeWrite, StaleViewAsRootOrInPlaceTarget) {
  Tensor w = from_vector<float>({-1, 2, -3, 4}).requires_grad_();
  Tensor h = w * 1.0;
  Tensor v = h.view({2, 2});
  h.mul_(2);
  v.backward(ones({2, 2}), /*retain_graph=*/true);
  EXPECT_TRUE(allclose(w.grad(), {2, 2, 2, 2}));
  w.set_grad(Tensor());
  v.add_(1.0);
  EXPECT_EQ(h.grad_fn_name(), "CopySlices");
  (h * h).sum().backward();  // h = 2w + 1
  EXPECT_TRUE(allclose(w.grad(), {-4, 20, -20, 36}));
}

// A view that does not require grad, of a base that an in-place op then
// makes require grad: the view takes the new history, as in PyTorch.
TEST(ViewBeforeWrite, ViewOfBufferThatBecomesDifferentiable) {
  Tensor w = from_vector<float>({1, 2, 3, 4}).requires_grad_();
  Tensor buf = zeros({4});
  Tensor v = buf.slice(0, 0, 2);
  buf.add_(w);
  EXPECT_TRUE(v.requires_grad());
  (v * 2.0).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {2, 2, 0, 0}));
  // Written through a view: the base takes the write (CopySlices).
  w.set_grad(Tensor());
  Tensor buf2 = zeros({4});
  Tensor head = buf2.slice(0, 0, 2);
  head.add_(w.slice(0, 0, 2));
  EXPECT_TRUE(buf2.requires_grad());
  (buf2 * w).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {2, 4, 0, 0}));
}

// An expanded view of a base written in place: its gradients add up at the
// element it repeats.
TEST(ViewBeforeWrite, ExpandedViewOfAWrittenBase) {
  Tensor w = from_vector<float>({1, 2, 3, 4}).requires_grad_();
  Tensor h = w * 1.0;
  Tensor e = h.unsqueeze(0).expand({3, 4});
  h.mul_(2);
  e.sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {6, 6, 6, 6}));
}

// A view of a view written in place; the outer view is regenerated from the base.
TEST(ViewBeforeWrite, ViewOfAViewWrittenInPlace) {
  Tensor w = from_vector<float>({1, 2, 3, 4}).requires_grad_();
  Tensor h = w * 1.0;
  Tensor v = h.view({2, 2});
  Tensor row = v.select(0, 1);
  row.mul_(10);
  (v * v).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {2, 4, 600, 800}));
}

// Writes autograd does not record leave the graph as it was (as in PyTorch):
// no error, and the old graph's gradient is PyTorch's answer.
TEST(ViewBeforeWrite, WritesOutsideAutogradKeepViewsUsable) {
  Tensor w = from_vector<float>({-1, 2, -3, 4}).requires_grad_();
  Tensor h = w * 1.0;
  Tensor v = h.view({2, 2});
  {
    NoGradGuard no_grad;
    h.mul_(3);
  }
  v.sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {1, 1, 1, 1}));
  // A view of a parameter updated by an optimizer-style no_grad write.
  Tensor p = from_vector<float>({1, 2}).requires_grad_();
  Tensor pv = p.view({2, 1});
  {
    NoGradGuard no_grad;
    p.sub_(from_vector<float>({0.5, 0.5}));
  }
  (pv * 2.0).sum().backward();
  EXPECT_TRUE(allclose(p.grad(), {2, 2}));
  // detach() and stale tensors under no_grad are outside the graph.
  Tensor h2 = w * 1.0;
  Tensor d = h2.detach();
  Tensor v2 = h2.view({4});
  h2.relu_();
  EXPECT_TRUE(allclose(d * 1.0, {0, 2, 0, 4}));
  NoGradGuard no_grad;
  EXPECT_TRUE(allclose(v2 * 1.0, {0, 2, 0, 4}));
}

}  // namespace
}  // namespace dtr

namespace dtr {
namespace {

using dtr::testing::allclose;

// A pointer from data_ptr kept and written through again later (a staging
// buffer): what was computed from the earlier bytes keeps its value under a
// budget, as for a from_blob buffer (Note [borrowed storage]).
TEST(Mutation, CachedDataPtrWrittenLaterChangesNoEarlierResult) {
  remat::set_memory_budget(int64_t(1) << 20);
  Tensor x = zeros({16384});
  float* p = x.data_ptr<float>();
  for (int i = 0; i < 16384; ++i) p[i] = 1.f;
  Tensor y = x.exp();
  const float before = y.sum().item<float>();
  for (int i = 0; i < 16384; ++i) p[i] = 2.f;
  const int64_t evictions = remat::stats().evictions;
  {
    std::vector<Tensor> held;
    for (int i = 0; i < 40; ++i) held.push_back(randn({16384}) + 1.0);
  }
  EXPECT_GT(remat::stats().evictions, evictions);
  EXPECT_EQ(y.sum().item<float>(), before);
  EXPECT_EQ(x.sum().item<float>(), 2.f * 16384);
  remat::set_memory_budget(std::nullopt);
}

// An in-place op whose other operand is the tensor written (or a view or a
// detached alias of it): backward reads the values from before the write.
TEST(Mutation, InPlaceWithAnAliasedOperandGetsTheOldValues) {
  auto run = [](int c) {
    Tensor w = from_vector<float>({-1, 2, -3, 4}).requires_grad_();
    Tensor h = w * 1.0;
    if (c == 0) h.mul_(h);
    if (c == 1) h.mul_(h.view({4}));
    if (c == 2) h.div_(h);
    if (c == 3) h.mul_(h.detach());
    h.sum().backward();
    return w.grad();
  };
  EXPECT_TRUE(allclose(run(0), {-2, 4, -6, 8}));  // d(h*h)/dw = 2w
  EXPECT_TRUE(allclose(run(1), {-2, 4, -6, 8}));
  EXPECT_TRUE(allclose(run(2), {0, 0, 0, 0}));
  EXPECT_TRUE(allclose(run(3), {-1, 2, -3, 4}));   // the detached factor is the old h
}

// A view of a detached tensor is outside the graph: never stale.
TEST(ViewBeforeWrite, ViewOfADetachedTensorIsNotStale) {
  Tensor w = from_vector<float>({-1, 2, -3, 4}).requires_grad_();
  Tensor h = w * 1.0;
  Tensor d = h.detach().view({2, 2});
  h.relu_();
  (h.view({2, 2}) * d).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {0, 2, 0, 4}));  // PyTorch 1.13
}

}  // namespace
}  // namespace dtr
