// The tag constants libtorch passes where PyTorch passes a string:
// reductions of the losses (dtr::kMean, dtr::kSum, dtr::kNone, or the enum
// dtr::Reduction::Mean ...) and the modes of pad and interpolate
// (dtr::kConstant, dtr::kReflect, dtr::kNearest, dtr::kBilinear).
//
//   F::mse_loss(x, y, F::MSELossFuncOptions().reduction(dtr::kSum));
//   nn::CrossEntropyLoss(nn::CrossEntropyLossOptions().reduction(dtr::Reduction::None));
#pragma once

#include <string_view>
#include <variant>

#include "core/error.h"

namespace dtr {

/// torch::Reduction::Reduction: how a loss reduces its per-element values.
namespace Reduction {
enum Reduction { None, Mean, Sum };
}  // namespace Reduction

/// One empty type per tag, each naming the PyTorch string it stands for.
namespace enumtype {
#define DTR_ENUM_TAG(Tag, str)                           \
  struct Tag {                                           \
    static constexpr std::string_view name() { return str; } \
  };
DTR_ENUM_TAG(kNone, "none")
DTR_ENUM_TAG(kMean, "mean")
DTR_ENUM_TAG(kSum, "sum")
DTR_ENUM_TAG(kConstant, "constant")
DTR_ENUM_TAG(kReflect, "reflect")
DTR_ENUM_TAG(kNearest, "nearest")
DTR_ENUM_TAG(kBilinear, "bilinear")
#undef DTR_ENUM_TAG
}  // namespace enumtype

inline constexpr enumtype::kNone kNone{};
inline constexpr enumtype::kMean kMean{};
inline constexpr enumtype::kSum kSum{};
inline constexpr enumtype::kConstant kConstant{};
inline constexpr enumtype::kReflect kReflect{};
inline constexpr enumtype::kNearest kNearest{};
inline constexpr enumtype::kBilinear kBilinear{};

/// The PyTorch string of a tag variant (libtorch's enumtype::get_enum_name):
/// "mean" for kMean.
template <typename... Tags>
std::string_view enum_name(const std::variant<Tags...>& v) {
  return std::visit([](auto tag) { return decltype(tag)::name(); }, v);
}

/// A loss's reduction as the options take it (libtorch's reduction_t):
/// a tag (dtr::kMean) or the enum (dtr::Reduction::Mean); default mean.
class LossReduction {
 public:
  LossReduction() = default;
  LossReduction(enumtype::kNone) : r_(Reduction::None) {}  // NOLINT: implicit like libtorch's variant
  LossReduction(enumtype::kMean) : r_(Reduction::Mean) {}  // NOLINT
  LossReduction(enumtype::kSum) : r_(Reduction::Sum) {}    // NOLINT
  LossReduction(Reduction::Reduction r) : r_(r) {}         // NOLINT
  Reduction::Reduction get() const { return r_; }
  /// "none", "mean" or "sum", as the dtr loss ops take it.
  std::string_view name() const {
    return r_ == Reduction::None ? "none" : r_ == Reduction::Sum ? "sum" : "mean";
  }
  bool operator==(const LossReduction& o) const { return r_ == o.r_; }

 private:
  Reduction::Reduction r_ = Reduction::Mean;
};

}  // namespace dtr
