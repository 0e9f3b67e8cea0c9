// libFuzzer target over the C++ op path: registry rows called through
// dispatch() with inputs of small random shapes and dtypes (any count, the
// row's or not) and hand-built attributes (the row's names with any type,
// other names), with attribute checking off as in a program (the test suite
// turns it on), then backward, casts (invalid dtypes too) and budgets.
//
// Input: a program of up to 48 steps, each one byte for the call and the
// bytes of its arguments (FuzzedDataProvider).
//
// Property: every call returns or throws a dtr::Error other than
// InternalError (a broken invariant, i.e. a dtr bug); never another
// exception, never a crash or sanitizer report. A broken property aborts,
// which libFuzzer reports as a crash with the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "tests/fuzz/fuzz_values.h"

#include "core/error.h"
#include "core/op_registry.h"
#include "eager/autograd.h"
#include "eager/dispatch.h"
#include "eager/ops.h"
#include "eager/tensor.h"
#include "remat/runtime.h"

namespace {

using namespace dtr;

[[noreturn]] void fail(const char* what, const std::string& op, const char* detail) {
  std::fprintf(stderr, "fuzz_dispatch: %s (op %s): %s\n", what, op.c_str(), detail);
  std::abort();
}

/// Runs `f`: a dtr::Error other than InternalError is an accepted outcome.
template <typename F>
void run(const std::string& what, F&& f) {
  try {
    f();
  } catch (const InternalError& e) {
    fail("InternalError", what, e.what());
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fail("non-dtr exception", what, e.what());
  } catch (...) {
    fail("non-std exception", what, "");
  }
}

class Program {
 public:
  explicit Program(FuzzedDataProvider& in) : in_(in) {}
  ~Program() {
    tensors_.clear();
    if (budget_set_) remat::set_memory_budget(std::nullopt);
  }

  void run_all() {
    for (int steps = 0; steps < 48 && in_.remaining_bytes() > 0; ++steps) step();
  }

 private:
  int64_t small_int() { return fuzz::small_int(in_); }
  double small_double() { return fuzz::small_double(in_); }
  DType any_dtype() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>();
    if (pick < 245) return DType(pick % kNumDTypes);
    return DType(pick % 2 == 0 ? 99 : kNumDTypes);  // not dtypes
  }
  AttrValue value_of(ParamType t) {
    switch (t) {
      case ParamType::kInt: return small_int();
      case ParamType::kFloat: return small_double();
      case ParamType::kBool: return in_.ConsumeBool();
      case ParamType::kInts: {
        Shape s;
        const size_t n = in_.ConsumeIntegralInRange<size_t>(0, 4);
        for (size_t i = 0; i < n; ++i) s.push_back(small_int());
        return s;
      }
      case ParamType::kDType: return any_dtype();
    }
    return int64_t{0};
  }
  const Tensor& any_tensor() {
    static const Tensor undefined;
    if (tensors_.empty() || in_.ConsumeIntegral<uint8_t>() >= 245) return undefined;
    return tensors_[in_.ConsumeIntegral<uint8_t>() % tensors_.size()];
  }

  void create() {
    const size_t ndim = in_.ConsumeIntegralInRange<size_t>(0, 3);
    Shape shape;
    int64_t numel = 1;
    for (size_t i = 0; i < ndim; ++i) {
      shape.push_back(in_.ConsumeIntegralInRange<int64_t>(0, 4));
      numel *= shape.back();
    }
    std::vector<float> values(static_cast<size_t>(numel));
    for (float& v : values) v = float(in_.ConsumeIntegralInRange<int>(-8, 8)) * 0.5f;
    const bool grad = in_.ConsumeBool();
    const DType dtype = any_dtype();
    run("from_vector/to", [&] {
      Tensor t = from_vector(values, shape);
      if (dtype != kFloat32) t = t.to(dtype);
      if (grad && t.is_floating_point()) t.requires_grad_();
      tensors_.push_back(std::move(t));
    });
  }

  void call_op() {
    const auto& rows = OpRegistry::instance().ops();
    const OpDef& op = *rows[in_.ConsumeIntegral<uint16_t>() % rows.size()];
    std::vector<Tensor> inputs(in_.ConsumeIntegralInRange<size_t>(0, 4));
    for (Tensor& t : inputs) t = any_tensor();
    Attrs attrs;
    run(op.name, [&] {
      // Mostly the declared parameters with their types; sometimes another
      // type, a missing one or an undeclared name.
      for (const ParamSpec& p : op.params) {
        const uint8_t pick = in_.ConsumeIntegral<uint8_t>();
        if (pick < 20) continue;  // left out
        const ParamType t = pick < 40 ? ParamType(pick % 5) : p.type;
        attrs.set(p.name, value_of(t));
      }
      if (in_.ConsumeIntegral<uint8_t>() < 16) attrs.set("bogus", small_int());
      const std::vector<Tensor> outs = dispatch(op, inputs, attrs);
      for (const Tensor& t : outs) {
        if (tensors_.size() < 32) tensors_.push_back(t);
      }
    });
  }

  void step() {
    switch (in_.ConsumeIntegral<uint8_t>() % 8) {
      case 0: case 1: create(); break;
      case 2: case 3: case 4: call_op(); break;
      case 5: {
        const Tensor t = any_tensor();
        const Tensor g = in_.ConsumeBool() ? Tensor() : any_tensor();
        const bool retain = in_.ConsumeBool();
        run("backward", [&] { t.backward(g, retain); });
        break;
      }
      case 6: {
        const Tensor t = any_tensor();
        const DType d = any_dtype();
        run("to/contiguous/sum", [&] {
          Tensor u = t.to(d);
          if (tensors_.size() < 32) tensors_.push_back(u);
          (void)t.contiguous();
        });
        break;
      }
      default: {
        constexpr int64_t kBudgets[] = {1, 64, 1024, 1 << 20};
        const uint8_t pick = in_.ConsumeIntegral<uint8_t>();
        run("set_memory_budget", [&] {
          if (pick < 200) {
            remat::set_memory_budget(kBudgets[pick % 4]);
            budget_set_ = true;
          } else {
            remat::set_memory_budget(std::nullopt);
          }
        });
        break;
      }
    }
  }

  FuzzedDataProvider& in_;
  std::vector<Tensor> tensors_;
  bool budget_set_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ensure_ops_registered();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Program program(in);
  program.run_all();
  return 0;
}
