// DTR_COST: a lineage node's recompute cost is the registry's estimate
// (reproducible) or the measured time of the op's first run.
#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "remat/lineage.h"
#include "remat/runtime.h"

namespace dtr {
namespace {

struct CostModelScope {
  explicit CostModelScope(CostModel m) : prev(remat::Runtime::global().cost_model()) {
    remat::Runtime::global().set_cost_model(m);
  }
  ~CostModelScope() { remat::Runtime::global().set_cost_model(prev); }
  CostModel prev;
};

double cost_of(const Tensor& t) { return remat::producer(*t.storage())->cost_seconds; }

TEST(CostModel, EstimateIsTheSameForTheSameOp) {
  CostModelScope scope(CostModel::kEstimate);
  manual_seed(1);
  Tensor a = randn({128, 64}), b = randn({64, 32});
  const double c1 = cost_of(matmul(a, b));
  const double c2 = cost_of(matmul(a, b));
  EXPECT_GT(c1, 0);
  EXPECT_EQ(c1, c2);
}

TEST(CostModel, MeasuredIsTheKernelsTime) {
  manual_seed(2);
  Tensor a = randn({256, 256}), b = randn({256, 256});
  double estimate = 0;
  {
    CostModelScope scope(CostModel::kEstimate);
    estimate = cost_of(matmul(a, b));
  }
  CostModelScope scope(CostModel::kMeasured);
  const double measured = cost_of(matmul(a, b));
  EXPECT_GT(measured, 0);
  EXPECT_LT(measured, 60.0);     // seconds: a wall-clock reading, not a default
  EXPECT_NE(measured, estimate);  // timed, not the roofline figure
}

}  // namespace
}  // namespace dtr
