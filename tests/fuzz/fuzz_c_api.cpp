// libFuzzer target over sequences of C API calls (bindings/c/dtr/dtr_c.h).
//
// The input is a program: each step takes one byte for the call and the
// bytes it needs for the arguments (FuzzedDataProvider). The calls act on a
// pool of handles that keeps freed ones, so double frees, use after free,
// handles of another kind and ids never issued all come up; tensors have
// small shapes (at most 3 dims of at most 4) and attribute values are small
// with rare extremes, so no call asks for gigabytes.
//
// Properties, checked after every call: the status is one of dtr_status's
// values and not DTR_ERR_INTERNAL (a dtr bug by the header's own words);
// after a failure dtr_last_error() is non-empty. At the end of each input
// every scope is ended, every handle freed, the budget removed and the
// options restored, and the live handle count is back where it started.
// ASan/UBSan/LeakSanitizer report what the checks cannot see. A broken
// property aborts, which libFuzzer reports as a crash with the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "tests/fuzz/fuzz_values.h"

#include "dtr/dtr_c.h"

namespace {

[[noreturn]] void fail(const char* call, dtr_status s, const char* what) {
  std::fprintf(stderr, "fuzz_c_api: %s returned %d (%s): %s; last error: %s\n", call, int(s),
               dtr_status_name(s), what, dtr_last_error());
  std::abort();
}

/// The per-call property: a known status, never internal, a message on failure.
dtr_status check(const char* call, dtr_status s) {
  if (int(s) < int(DTR_OK) || int(s) > int(DTR_ERR_RUNTIME)) fail(call, s, "not a dtr_status");
  if (s == DTR_ERR_INTERNAL) fail(call, s, "an internal error (a bug, by the header)");
  if (s != DTR_OK && dtr_last_error()[0] == '\0') fail(call, s, "failed without a message");
  return s;
}
#define CALL(expr) check(#expr, (expr))

/// One op's declared parameters, from dtr_op_params: "dim (int), keepdim (bool)".
struct Param {
  std::string name;
  std::string type;
};
std::vector<Param> parse_params(std::string_view text) {
  std::vector<Param> out;
  if (text == "none") return out;
  while (!text.empty()) {
    const size_t comma = text.find(", ");
    const std::string_view entry = text.substr(0, comma);
    const size_t paren = entry.find(" (");
    if (paren != std::string_view::npos && entry.back() == ')') {
      out.push_back({std::string(entry.substr(0, paren)),
                     std::string(entry.substr(paren + 2, entry.size() - paren - 3))});
    }
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 2);
  }
  return out;
}

/// The registry, read once through the API.
struct Ops {
  std::vector<std::string> names;
  std::vector<std::vector<Param>> params;
  std::vector<int> num_inputs;
};
const Ops& ops() {
  static const Ops o = [] {
    Ops r;
    size_t count = 0;
    CALL(dtr_op_count(&count));
    for (size_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      CALL(dtr_op_name(i, &name));
      const char* params = nullptr;
      int n = -1;
      CALL(dtr_op_params(name, &params, &n));
      r.names.emplace_back(name);
      r.params.push_back(parse_params(params));
      r.num_inputs.push_back(n);
    }
    return r;
  }();
  return o;
}

constexpr const char* kAttrNames[] = {"dim",   "dims",  "keepdim", "other", "alpha", "value",
                                      "shape", "dtype", "p",       "eps",   "start", "end",
                                      "step",  "min",   "max",     "stride", "padding", "groups"};
constexpr const char* kOptions[] = {"DTR_MEMORY_BUDGET", "DTR_HEURISTIC", "DTR_SAMPLE",
                                    "DTR_MIN_EVICT_BYTES", "DTR_COST", "DTR_VERIFY",
                                    "DTR_THRASH_LIMIT", "DTR_ONEDNN_GEMM", "DTR_COLLECTIVE_TIMEOUT", "DTR_CUDA_SYNC",
                                    "DTR_NOT_AN_OPTION"};
constexpr const char* kOptionValues[] = {
    "", "none", "1", "100", "4096", "1KiB", "0.00000000001%", "50%", "100%", "0", "-1",
    "dtr_eq", "dtr", "dtr_local", "lru", "size", "msps", "all", "sqrt", "estimate",
    "measured", "on", "off", "cpu=1KiB", "cuda:0=1GiB", "cpu=none,cpu=none", "nan%"};

class Program {
 public:
  explicit Program(FuzzedDataProvider& in) : in_(in) { CALL(dtr_live_handles(&live_at_start_)); }
  ~Program() { teardown(); }

  void run() {
    for (int steps = 0; steps < 64 && in_.remaining_bytes() > 0; ++steps) step();
  }

 private:
  // ---- the pool of handles ----------------------------------------------------
  /// A tensor handle: mostly a live one, sometimes a freed one, another
  /// kind's, DTR_NULL or an id never issued.
  uint64_t any_tensor() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>();
    if (pick < 200 && !tensors_.empty()) return tensors_[pick % tensors_.size()];
    if (pick < 215 && !freed_.empty()) return freed_[pick % freed_.size()];
    if (pick < 225 && !attrs_.empty()) return attrs_[pick % attrs_.size()];
    if (pick < 235) return DTR_NULL;
    return in_.ConsumeIntegral<uint64_t>();
  }
  uint64_t any_attrs() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>();
    if (pick < 64) return DTR_NULL;
    if (pick < 220 && !attrs_.empty()) return attrs_[pick % attrs_.size()];
    if (pick < 235 && !tensors_.empty()) return tensors_[pick % tensors_.size()];
    return in_.ConsumeIntegral<uint64_t>();
  }
  void keep(dtr_tensor t) {
    if (t != DTR_NULL) tensors_.push_back(t);
  }
  /// Frees `h` through `free_fn` and moves it from `pool` to the freed ones.
  template <typename Free>
  void release(std::vector<uint64_t>& pool, uint64_t h, Free free_fn, const char* what) {
    const dtr_status s = check(what, free_fn(h));
    for (size_t i = 0; i < pool.size(); ++i) {
      if (pool[i] == h) {
        if (s != DTR_OK) fail(what, s, "freeing a live handle failed");
        pool.erase(pool.begin() + ptrdiff_t(i));
        freed_.push_back(h);
        return;
      }
    }
  }

  // ---- argument values ----------------------------------------------------------
  int64_t small_int() { return dtr::fuzz::small_int(in_); }
  double small_double() { return dtr::fuzz::small_double(in_); }
  // Dtypes as ints: an enum variable holding a value no enumerator names is
  // UB in C++ (UBSan's -fsanitize=enum flags its loads); C callers pass any
  // int, so the calls get the cast value directly.
  int any_dtype() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>();
    if (pick < 240) return pick % 8;
    return pick % 3 == 0 ? 99 : pick % 3 == 1 ? -1 : 8;  // not dtypes
  }
  static size_t element_size(int d) {
    switch (d) {
      case DTR_FLOAT64: case DTR_INT64: return 8;
      case DTR_FLOAT32: case DTR_INT32: return 4;
      case DTR_FLOAT16: case DTR_BFLOAT16: return 2;
      default: return 1;
    }
  }
  std::string name_bytes() { return in_.ConsumeRandomLengthString(40); }

  // ---- the calls ------------------------------------------------------------------
  void create_tensor() {
    const int dtype = any_dtype();
    const size_t ndim = in_.ConsumeIntegralInRange<size_t>(0, 3);
    int64_t shape[3];
    int64_t numel = 1;
    for (size_t i = 0; i < ndim; ++i) {
      shape[i] = in_.ConsumeIntegralInRange<int64_t>(0, 4);
      if (in_.ConsumeIntegral<uint8_t>() == 255) shape[i] = -1;  // invalid
      numel *= shape[i] < 0 ? 1 : shape[i];
    }
    size_t nbytes = size_t(numel) * element_size(dtype);
    if (in_.ConsumeIntegral<uint8_t>() >= 250) nbytes += 1;  // wrong size
    std::vector<uint8_t> data(nbytes);
    for (auto& b : data) b = in_.ConsumeIntegral<uint8_t>();
    // Bools must be 0 or 1: half the time valid, else whatever came.
    if (dtype == DTR_BOOL && in_.ConsumeBool()) for (auto& b : data) b &= 1;
    dtr_tensor t = DTR_NULL;
    if (CALL(dtr_tensor_from_data(data.empty() ? nullptr : data.data(), nbytes,
                                  static_cast<dtr_dtype>(dtype), shape, ndim,
                                  &t)) == DTR_OK) {
      keep(t);
    }
  }

  void set_attr(dtr_attrs a, const std::string& name, const std::string& type) {
    const char* n = name.c_str();
    if (type == "int") {
      CALL(dtr_attrs_set_int(a, n, small_int()));
    } else if (type == "float") {
      CALL(dtr_attrs_set_float(a, n, small_double()));
    } else if (type == "bool") {
      CALL(dtr_attrs_set_bool(a, n, in_.ConsumeIntegral<uint8_t>() % 3));
    } else if (type == "ints") {
      int64_t v[4];
      const size_t k = in_.ConsumeIntegralInRange<size_t>(0, 4);
      for (size_t i = 0; i < k; ++i) v[i] = small_int();
      CALL(dtr_attrs_set_ints(a, n, k == 0 && in_.ConsumeBool() ? nullptr : v, k));
    } else {
      CALL(dtr_attrs_set_dtype(a, n, static_cast<dtr_dtype>(any_dtype())));
    }
  }

  void attrs_call() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>() % 8;
    if (pick == 0 || attrs_.empty()) {
      dtr_attrs a = DTR_NULL;
      if (CALL(dtr_attrs_new(&a)) == DTR_OK) attrs_.push_back(a);
      return;
    }
    const dtr_attrs a = any_attrs();
    if (pick == 1) {
      release(attrs_, a, dtr_attrs_free, "dtr_attrs_free");
      return;
    }
    if (pick == 2) {
      CALL(dtr_attrs_clear(a));
      return;
    }
    // A name: one the target op declares (with its type or another), from
    // the dictionary, or bytes.
    constexpr const char* kTypes[] = {"int", "float", "bool", "ints", "dtype"};
    std::string name, type = kTypes[in_.ConsumeIntegral<uint8_t>() % 5];
    const Ops& o = ops();
    const size_t op = in_.ConsumeIntegral<uint16_t>() % o.names.size();
    if (pick <= 5 && !o.params[op].empty()) {
      const Param& p = o.params[op][in_.ConsumeIntegral<uint8_t>() % o.params[op].size()];
      name = p.name;
      if (pick <= 4) type = p.type;
    } else if (pick == 6) {
      name = kAttrNames[in_.ConsumeIntegral<uint8_t>() % std::size(kAttrNames)];
    } else {
      name = name_bytes();
    }
    if (in_.ConsumeIntegral<uint8_t>() == 0) {
      CALL(dtr_attrs_set_int(a, nullptr, 1));  // null name
      return;
    }
    set_attr(a, name, type);
  }

  void op_call() {
    const Ops& o = ops();
    std::string name;
    size_t op = 0;
    const bool by_row = in_.ConsumeIntegral<uint8_t>() < 240;
    if (by_row) {
      op = in_.ConsumeIntegral<uint16_t>() % o.names.size();
      name = o.names[op];
    } else {
      name = name_bytes();
    }
    // Mostly the declared input count, sometimes another.
    size_t n = in_.ConsumeIntegralInRange<size_t>(0, 3);
    if (by_row && o.num_inputs[op] >= 0 && in_.ConsumeIntegral<uint8_t>() < 200) {
      n = size_t(o.num_inputs[op]);
    }
    dtr_tensor inputs[8] = {};
    n = std::min<size_t>(n, 8);
    for (size_t i = 0; i < n; ++i) inputs[i] = any_tensor();
    const dtr_attrs a = any_attrs();
    dtr_tensor outputs[4] = {};
    const size_t capacity = in_.ConsumeIntegralInRange<size_t>(0, 4);
    size_t n_out = 0;
    const bool null_inputs = n == 0 && in_.ConsumeBool();
    if (CALL(dtr_op_call(name.c_str(), null_inputs ? nullptr : inputs, n, a, outputs, capacity,
                         in_.ConsumeBool() ? &n_out : nullptr)) == DTR_OK) {
      for (size_t i = 0; i < capacity; ++i) keep(outputs[i]);
    }
  }

  void tensor_query() {
    const dtr_tensor t = any_tensor();
    switch (in_.ConsumeIntegral<uint8_t>() % 12) {
      case 0: {
        size_t ndim = 0;
        CALL(dtr_tensor_ndim(t, &ndim));
        break;
      }
      case 1: {
        int64_t shape[4];
        size_t ndim = 0;
        CALL(dtr_tensor_shape(t, shape, in_.ConsumeIntegralInRange<size_t>(0, 4),
                              in_.ConsumeBool() ? &ndim : nullptr));
        break;
      }
      case 2: {
        int64_t numel = 0;
        CALL(dtr_tensor_numel(t, in_.ConsumeBool() ? &numel : nullptr));
        break;
      }
      case 3: {
        dtr_dtype d;
        dtr_device_type type;
        int index = 0;
        CALL(dtr_tensor_dtype(t, &d));
        CALL(dtr_tensor_device(t, &type, &index));
        break;
      }
      case 4: {
        double v = 0;
        int64_t i = 0;
        CALL(dtr_tensor_item_double(t, &v));
        CALL(dtr_tensor_item_int64(t, &i));
        break;
      }
      case 5: {
        // The right byte count when it can be known, else a guess.
        int64_t numel = 0;
        dtr_dtype d = DTR_FLOAT32;
        size_t nbytes = in_.ConsumeIntegralInRange<size_t>(0, 64);
        if (dtr_tensor_numel(t, &numel) == DTR_OK && dtr_tensor_dtype(t, &d) == DTR_OK &&
            in_.ConsumeBool()) {
          nbytes = size_t(numel) * element_size(d);
        }
        std::vector<uint8_t> buf(nbytes);
        CALL(dtr_tensor_to_data(t, buf.empty() ? nullptr : buf.data(), nbytes));
        break;
      }
      case 6: {
        const char* text = nullptr;
        if (CALL(dtr_tensor_str(t, &text)) == DTR_OK && text == nullptr) {
          fail("dtr_tensor_str", DTR_OK, "null text");
        }
        break;
      }
      case 7: {
        dtr_tensor out = DTR_NULL;
        if (CALL(dtr_tensor_retain(t, &out)) == DTR_OK) keep(out);
        break;
      }
      case 8: {
        dtr_tensor out = DTR_NULL;
        if (CALL(dtr_tensor_detach(t, &out)) == DTR_OK) keep(out);
        break;
      }
      case 9: {
        dtr_tensor out = DTR_NULL;
        const int index = in_.ConsumeIntegralInRange<int>(-1, 2);
        if (CALL(dtr_tensor_to_device(t, dtr_device_type(in_.ConsumeIntegralInRange<int>(0, 2)),
                                      index, &out)) == DTR_OK) {
          keep(out);
        }
        break;
      }
      case 10: CALL(dtr_tensor_set_requires_grad(t, in_.ConsumeIntegral<uint8_t>() % 3)); break;
      default: {
        int rg = 0;
        CALL(dtr_tensor_requires_grad(t, &rg));
        break;
      }
    }
  }

  void autograd_call() {
    const dtr_tensor t = any_tensor();
    switch (in_.ConsumeIntegral<uint8_t>() % 4) {
      case 0: {
        const dtr_tensor g = in_.ConsumeBool() ? DTR_NULL : any_tensor();
        CALL(dtr_tensor_backward(t, g, in_.ConsumeBool()));
        break;
      }
      case 1: {
        dtr_tensor g = DTR_NULL;
        if (CALL(dtr_tensor_grad(t, &g)) == DTR_OK) keep(g);
        break;
      }
      case 2: CALL(dtr_tensor_zero_grad(t)); break;
      default: {
        int on = 0;
        CALL(dtr_grad_enabled(&on));
        break;
      }
    }
  }

  void scope_call() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>() % 4;
    dtr_scope s = DTR_NULL;
    if (pick == 0) {
      if (CALL(dtr_no_grad_begin(&s)) == DTR_OK) scopes_.push_back(s);
    } else if (pick == 1) {
      if (CALL(dtr_autocast_begin(static_cast<dtr_dtype>(any_dtype()), &s)) == DTR_OK) {
        scopes_.push_back(s);
      }
    } else if (!scopes_.empty()) {
      // Innermost (must work), or another one (must fail without changes).
      const size_t i = pick == 2 ? scopes_.size() - 1
                                 : in_.ConsumeIntegral<uint8_t>() % scopes_.size();
      const dtr_status st = CALL(dtr_scope_end(scopes_[i]));
      if (i == scopes_.size() - 1 && st != DTR_OK) fail("dtr_scope_end", st, "innermost failed");
      if (st == DTR_OK) {
        freed_.push_back(scopes_[i]);
        scopes_.erase(scopes_.begin() + ptrdiff_t(i));
      }
    } else {
      CALL(dtr_scope_end(any_tensor()));
    }
  }

  void module_call() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>() % 5;
    if (pick == 0 || modules_.empty()) {
      dtr_module m = DTR_NULL;
      const int64_t in_f = in_.ConsumeIntegralInRange<int64_t>(-1, 4);
      const int64_t out_f = in_.ConsumeIntegralInRange<int64_t>(-1, 4);
      if (CALL(dtr_nn_linear(in_f, out_f, in_.ConsumeBool(), &m)) == DTR_OK) modules_.push_back(m);
      return;
    }
    const dtr_module m = modules_[in_.ConsumeIntegral<uint8_t>() % modules_.size()];
    if (pick == 1) {
      dtr_tensor out = DTR_NULL;
      if (CALL(dtr_module_forward(m, any_tensor(), &out)) == DTR_OK) keep(out);
    } else if (pick == 2) {
      dtr_tensor params[4] = {};
      size_t count = 0;
      const size_t capacity = in_.ConsumeIntegralInRange<size_t>(0, 4);
      if (CALL(dtr_module_parameters(m, capacity == 0 ? nullptr : params, capacity, &count)) ==
          DTR_OK) {
        for (size_t i = 0; i < std::min(count, capacity); ++i) keep(params[i]);
      }
    } else if (pick == 3) {
      dtr_optimizer opt = DTR_NULL;
      size_t count = 0;
      dtr_tensor params[4] = {};
      if (dtr_module_parameters(m, params, 4, &count) != DTR_OK) count = 0;
      if (CALL(dtr_optim_sgd(params, count, small_double(), 0.0, 0.0, 0, &opt)) == DTR_OK) {
        CALL(dtr_optimizer_step(opt));
        CALL(dtr_optimizer_zero_grad(opt));
        CALL(dtr_optimizer_free(opt));
        CALL(dtr_optimizer_step(opt));  // freed: an error code
      }
      for (size_t i = 0; i < count; ++i) CALL(dtr_tensor_free(params[i]));
    } else {
      release(modules_, m, dtr_module_free, "dtr_module_free");
    }
  }

  void budget_call() {
    const uint8_t pick = in_.ConsumeIntegral<uint8_t>() % 6;
    const dtr_device_type type = dtr_device_type(in_.ConsumeIntegral<uint8_t>() < 240 ? 0 : 1);
    const int index = in_.ConsumeIntegral<uint8_t>() < 240 ? 0 : in_.ConsumeIntegral<int8_t>();
    if (pick <= 1) {
      constexpr int64_t kBudgets[] = {1, 7, 64, 1000, 4096, 1 << 20, -1, 0,
                                      std::numeric_limits<int64_t>::max()};
      const int64_t bytes = kBudgets[in_.ConsumeIntegral<uint8_t>() % std::size(kBudgets)];
      if (CALL(dtr_set_memory_budget(type, index, bytes)) == DTR_OK) budget_set_ = true;
    } else if (pick == 2) {
      int64_t bytes = 0;
      CALL(dtr_memory_budget(type, index, &bytes));
    } else if (pick == 3) {
      double values[DTR_STAT_COUNT + 4];
      const size_t n = in_.ConsumeIntegralInRange<size_t>(0, DTR_STAT_COUNT + 4);
      CALL(dtr_stats(type, index, n == 0 && in_.ConsumeBool() ? nullptr : values, n));
    } else if (pick == 4) {
      CALL(dtr_reset_stats());
    } else {
      const char* name = kOptions[in_.ConsumeIntegral<uint8_t>() % std::size(kOptions)];
      const std::string value =
          in_.ConsumeBool() ? kOptionValues[in_.ConsumeIntegral<uint8_t>() % std::size(kOptionValues)]
                            : name_bytes();
      if (CALL(dtr_set_option(name, value.c_str())) == DTR_OK) options_set_ = true;
    }
  }

  void step() {
    switch (in_.ConsumeIntegral<uint8_t>() % 12) {
      case 0: case 1: create_tensor(); break;
      case 2: case 3: case 4: op_call(); break;
      case 5: attrs_call(); break;
      case 6: {
        if (tensors_.empty()) break;
        const dtr_tensor t = any_tensor();
        release(tensors_, t, dtr_tensor_free, "dtr_tensor_free");
        break;
      }
      case 7: tensor_query(); break;
      case 8: autograd_call(); break;
      case 9: scope_call(); break;
      case 10: module_call(); break;
      default:
        if (in_.ConsumeIntegral<uint8_t>() < 32) {
          CALL(dtr_manual_seed(in_.ConsumeIntegral<uint64_t>()));
        } else {
          budget_call();
        }
        break;
    }
  }

  void teardown() {
    while (!scopes_.empty()) {
      if (CALL(dtr_scope_end(scopes_.back())) != DTR_OK) fail("teardown", DTR_OK, "scope_end");
      scopes_.pop_back();
    }
    for (const dtr_module m : modules_) CALL(dtr_module_free(m));
    for (const dtr_attrs a : attrs_) CALL(dtr_attrs_free(a));
    for (const dtr_tensor t : tensors_) CALL(dtr_tensor_free(t));
    if (budget_set_) CALL(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, -1));
    if (options_set_) {
      for (const char* name : kOptions) dtr_set_option(name, "");
      CALL(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, -1));
    }
    size_t live = 0;
    CALL(dtr_live_handles(&live));
    if (live != live_at_start_) fail("dtr_live_handles", DTR_OK, "handles leaked");
  }

  FuzzedDataProvider& in_;
  std::vector<uint64_t> tensors_, attrs_, modules_, scopes_, freed_;
  bool budget_set_ = false, options_set_ = false;
  size_t live_at_start_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Program program(in);
  program.run();
  return 0;
}
