// How a loss reduces its per-element values, in libtorch's spellings:
// the enum `Reduction::Mean` / `Reduction::Sum` / `Reduction::None` (at::Reduction,
// the int64 the free loss functions take) and the tag constants `kMean`,
// `kSum`, `kNone` (torch::enumtype, what loss options take). `LossReduction`
// accepts either, plus PyTorch's strings "mean" / "sum" / "none", so every
// loss function takes one parameter type whichever spelling the caller uses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "core/error.h"

namespace dtr {

/// at::Reduction: the codes libtorch's loss functions take (None = 0,
/// Mean = 1, Sum = 2; the values are libtorch's, so an int64 written for
/// libtorch means the same here).
namespace Reduction {
enum Reduction : int64_t { None = 0, Mean = 1, Sum = 2, END = 3 };
}  // namespace Reduction

/// libtorch's tag types (torch::enumtype::kMean, ...) and their constants.
namespace enumtype {
struct kNone {
  static constexpr std::string_view name() { return "none"; }
};
struct kMean {
  static constexpr std::string_view name() { return "mean"; }
};
struct kSum {
  static constexpr std::string_view name() { return "sum"; }
};
}  // namespace enumtype
inline constexpr enumtype::kNone kNone{};
inline constexpr enumtype::kMean kMean{};
inline constexpr enumtype::kSum kSum{};

/// The std::variant that libtorch's loss options hold (their reduction_t).
using reduction_t = std::variant<enumtype::kNone, enumtype::kMean, enumtype::kSum>;

/// A reduction given in any of libtorch's or PyTorch's spellings. Implicit
/// from Reduction::Reduction (or its int64 code), from the tags kNone /
/// kMean / kSum or a reduction_t holding one, and from "none" / "mean" /
/// "sum". Throws ValueError naming the value for a code outside 0..2 or any
/// other string (PyTorch: "... is not a valid value for reduction").
class LossReduction {
 public:
  /// Mean, the default of every PyTorch loss.
  LossReduction() = default;
  LossReduction(Reduction::Reduction r) : LossReduction(int64_t(r)) {}  // NOLINT: implicit
  LossReduction(int64_t code) : r_(Reduction::Reduction(code)) {  // NOLINT: implicit
    DTR_CHECK(code >= Reduction::None && code <= Reduction::Sum, ValueError,
              "reduction: {} is not a valid reduction code (Reduction::None = 0, Mean = 1, Sum = 2)",
              code);
  }
  LossReduction(int code) : LossReduction(int64_t(code)) {}              // NOLINT: implicit
  LossReduction(enumtype::kNone) : r_(Reduction::None) {}                // NOLINT: implicit
  LossReduction(enumtype::kMean) : r_(Reduction::Mean) {}                // NOLINT: implicit
  LossReduction(enumtype::kSum) : r_(Reduction::Sum) {}                  // NOLINT: implicit
  LossReduction(const reduction_t& v)                                    // NOLINT: implicit
      : r_(Reduction::Reduction(v.index() == 0 ? Reduction::None
                                               : v.index() == 1 ? Reduction::Mean : Reduction::Sum)) {}
  LossReduction(std::string_view name) {  // NOLINT: implicit
    if (name == "none") r_ = Reduction::None;
    else if (name == "mean") r_ = Reduction::Mean;
    else if (name == "sum") r_ = Reduction::Sum;
    else
      throw ValueError(fmt::format("reduction: '{}' is not a valid value for reduction "
                                   "(expected 'none', 'mean' or 'sum')", name));
  }
  LossReduction(const char* name) : LossReduction(std::string_view(name)) {}  // NOLINT: implicit
  LossReduction(const std::string& name) : LossReduction(std::string_view(name)) {}  // NOLINT

  Reduction::Reduction value() const { return r_; }
  Reduction::Reduction get() const { return r_; }
  int64_t code() const { return int64_t(r_); }
  /// "none", "mean" or "sum".
  std::string_view name() const {
    return r_ == Reduction::None ? "none" : r_ == Reduction::Mean ? "mean" : "sum";
  }
  friend bool operator==(LossReduction a, LossReduction b) { return a.r_ == b.r_; }
  friend bool operator==(LossReduction a, Reduction::Reduction b) { return a.r_ == b; }

 private:
  Reduction::Reduction r_ = Reduction::Mean;
};

}  // namespace dtr
