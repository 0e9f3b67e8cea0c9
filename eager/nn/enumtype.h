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
#include "eager/reduction.h"  // Reduction, kNone / kMean / kSum, LossReduction

namespace dtr {

/// One empty type per mode tag, each naming the PyTorch string it stands for
/// (the reduction tags are in eager/reduction.h).
namespace enumtype {
#define DTR_ENUM_TAG(Tag, str)                           \
  struct Tag {                                           \
    static constexpr std::string_view name() { return str; } \
  };
DTR_ENUM_TAG(kConstant, "constant")
DTR_ENUM_TAG(kReflect, "reflect")
DTR_ENUM_TAG(kNearest, "nearest")
DTR_ENUM_TAG(kBilinear, "bilinear")
#undef DTR_ENUM_TAG
}  // namespace enumtype

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

}  // namespace dtr
