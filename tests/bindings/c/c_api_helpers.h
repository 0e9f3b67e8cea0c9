// What the C API tests share: tensors from and to std::vector, one-output op
// calls, and a fixture that checks every test frees all its handles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr_c.h"

namespace dtr::capi::testing {

/// Expects DTR_OK, showing the status and message otherwise.
#define DTR_C_OK(call)                                                                 \
  do {                                                                                 \
    const dtr_status s_ = (call);                                                      \
    ASSERT_EQ(s_, DTR_OK) << #call << ": " << dtr_status_name(s_) << ": " << dtr_last_error(); \
  } while (0)

inline dtr_tensor make(const std::vector<float>& v, const std::vector<int64_t>& shape) {
  dtr_tensor t = DTR_NULL;
  EXPECT_EQ(dtr_tensor_from_data(v.data(), v.size() * sizeof(float), DTR_FLOAT32, shape.data(),
                                 shape.size(), &t),
            DTR_OK)
      << dtr_last_error();
  return t;
}

inline std::vector<float> read(dtr_tensor t) {
  int64_t n = 0;
  EXPECT_EQ(dtr_tensor_numel(t, &n), DTR_OK) << dtr_last_error();
  std::vector<float> out(size_t(n > 0 ? n : 0));
  EXPECT_EQ(dtr_tensor_to_data(t, out.data(), out.size() * sizeof(float)), DTR_OK) << dtr_last_error();
  return out;
}

/// The one output of op `name` (DTR_NULL and a test failure on error).
inline dtr_tensor call(const char* name, std::vector<dtr_tensor> in, dtr_attrs attrs = DTR_NULL) {
  dtr_tensor out = DTR_NULL;
  size_t n = 0;
  const dtr_status s = dtr_op_call(name, in.data(), in.size(), attrs, &out, 1, &n);
  EXPECT_EQ(s, DTR_OK) << name << ": " << dtr_status_name(s) << ": " << dtr_last_error();
  EXPECT_EQ(n, s == DTR_OK ? 1u : 0u);
  return out;
}

/// An attribute list {name: ints}.
inline dtr_attrs ints_attr(const char* name, const std::vector<int64_t>& v) {
  dtr_attrs a = DTR_NULL;
  EXPECT_EQ(dtr_attrs_new(&a), DTR_OK);
  EXPECT_EQ(dtr_attrs_set_ints(a, name, v.data(), v.size()), DTR_OK) << dtr_last_error();
  return a;
}

inline size_t live_handles() {
  size_t n = 0;
  EXPECT_EQ(dtr_live_handles(&n), DTR_OK);
  return n;
}

/// Fails a test that leaves handles alive.
class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override { live_at_start_ = live_handles(); }
  void TearDown() override { EXPECT_EQ(live_handles(), live_at_start_) << "handles leaked"; }

 private:
  size_t live_at_start_ = 0;
};

}  // namespace dtr::capi::testing
