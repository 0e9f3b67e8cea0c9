#include "eager/data/transforms.h"

#include "core/error.h"
#include "eager/ops.h"

namespace dtr::data::transforms::detail {

Tensor channel_statistic(const std::vector<double>& values, const char* what) {
  DTR_CHECK(!values.empty(), ValueError, "Normalize: {} must hold at least one value", what);
  return from_vector(values, {int64_t(values.size()), 1, 1}, kFloat32);
}

Tensor normalize(const Tensor& input, const Tensor& mean, const Tensor& stddev) {
  const int64_t channels = input.dim() >= 3 ? input.size(-3) : 1;
  for (const Tensor* s : {&mean, &stddev}) {
    DTR_CHECK(s->size(0) == 1 || s->size(0) == channels, ValueError,
              "Normalize: {} statistics do not fit data of shape {} ({} channel(s) in dimension -3)", s->size(0),
              shape_str(input.shape()), channels);
  }
  const Device device = input.device();
  return (input - mean.to(device)) / stddev.to(device);
}

Example<> stack_examples(const std::vector<Example<>>& batch) {
  DTR_CHECK(!batch.empty(), ValueError, "Stack: cannot collate an empty batch");
  std::vector<Tensor> data, targets;
  data.reserve(batch.size());
  targets.reserve(batch.size());
  for (const Example<>& e : batch) {
    data.push_back(e.data);
    targets.push_back(e.target);
  }
  return {stack(data), stack(targets)};
}

}  // namespace dtr::data::transforms::detail
