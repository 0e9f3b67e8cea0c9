// The C ABI (bindings/c/dtr/dtr_c.h): every status code's path (null and
// freed handles, handles of another kind, unknown ops, wrong attribute names
// and types, wrong input counts, scopes ended on the wrong thread or out of
// order, objects in use, out of memory under a tiny budget and the recovery
// after it) and the values of tensors, ops, autograd, modules and
// optimizers through it. Each test frees every handle it made (CApiTest).
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <dlpack/dlpack.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "c_api_helpers.h"
#include "child_process.h"
#include "handles.h"  // bindings/c: to hold an object's use flag as another call would
#include "core/options.h"
#include "remat/runtime.h"

namespace dtr::capi::testing {
namespace {

using ::testing::HasSubstr;

std::string last_error() { return dtr_last_error(); }

// ---- version, errors, handles ------------------------------------------------

TEST_F(CApiTest, VersionMatchesTheHeader) {
  int major = -1, minor = -1, patch = -1;
  DTR_C_OK(dtr_version(&major, &minor, &patch));
  EXPECT_EQ(major, DTR_C_VERSION_MAJOR);
  EXPECT_EQ(minor, DTR_C_VERSION_MINOR);
  EXPECT_EQ(patch, DTR_C_VERSION_PATCH);
  EXPECT_EQ(std::string(dtr_version_string()),
            std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
  EXPECT_EQ(dtr_version(nullptr, &minor, &patch), DTR_ERR_INVALID_ARGUMENT);
}

TEST_F(CApiTest, StatusNames) {
  EXPECT_STREQ(dtr_status_name(DTR_OK), "DTR_OK");
  EXPECT_STREQ(dtr_status_name(DTR_ERR_WRONG_THREAD), "DTR_ERR_WRONG_THREAD");
  EXPECT_STREQ(dtr_status_name(DTR_ERR_INTERNAL), "DTR_ERR_INTERNAL");
  EXPECT_STREQ(dtr_status_name(DTR_ERR_RUNTIME), "DTR_ERR_RUNTIME");
}

// A second backward through a freed graph is the user's error (PyTorch's
// RuntimeError), not DTR_ERR_INTERNAL, which the header reserves for bugs.
TEST_F(CApiTest, SecondBackwardIsARuntimeError) {
  const float v = 2.0f;
  dtr_tensor x = DTR_NULL, y = DTR_NULL;
  DTR_C_OK(dtr_tensor_from_data(&v, sizeof v, DTR_FLOAT32, nullptr, 0, &x));
  DTR_C_OK(dtr_tensor_set_requires_grad(x, 1));
  const dtr_tensor in[2] = {x, x};
  DTR_C_OK(dtr_op_call("mul", in, 2, DTR_NULL, &y, 1, nullptr));
  DTR_C_OK(dtr_tensor_backward(y, DTR_NULL, 0));
  EXPECT_EQ(dtr_tensor_backward(y, DTR_NULL, 0), DTR_ERR_RUNTIME);
  EXPECT_STRNE(dtr_last_error(), "");
  DTR_C_OK(dtr_tensor_free(y));
  DTR_C_OK(dtr_tensor_free(x));
}

TEST_F(CApiTest, NullOutPointersAreInvalidArguments) {
  const float v = 1;
  const int64_t shape[1] = {1};
  EXPECT_EQ(dtr_tensor_from_data(&v, sizeof v, DTR_FLOAT32, shape, 1, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(last_error(), HasSubstr("null out-pointer"));
  dtr_tensor t = make({1}, {1});
  EXPECT_EQ(dtr_tensor_numel(t, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_tensor_item_double(t, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_tensor_grad(t, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_op_call(nullptr, &t, 1, DTR_NULL, nullptr, 0, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_op_call("neg", nullptr, 1, DTR_NULL, nullptr, 0, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_op_call("neg", &t, 1, DTR_NULL, nullptr, 1, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_no_grad_begin(nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_nn_linear(2, 2, 1, nullptr), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_set_option(nullptr, "x"), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_stats(DTR_DEVICE_CPU, 0, nullptr, 3), DTR_ERR_INVALID_ARGUMENT);
  // Enum values outside the enumerators: c_header_check.c (legal in C only).
  DTR_C_OK(dtr_tensor_free(t));
}

TEST_F(CApiTest, NullNeverIssuedAndOtherKindHandlesAreInvalid) {
  int64_t n = 0;
  EXPECT_EQ(dtr_tensor_numel(DTR_NULL, &n), DTR_ERR_INVALID_HANDLE);
  EXPECT_THAT(last_error(), HasSubstr("null tensor handle"));
  EXPECT_EQ(dtr_tensor_numel(0x0100000100abcdefULL, &n), DTR_ERR_INVALID_HANDLE);
  EXPECT_EQ(dtr_tensor_numel(~uint64_t(0), &n), DTR_ERR_INVALID_HANDLE);
  EXPECT_EQ(dtr_module_train(12345, 1), DTR_ERR_INVALID_HANDLE);
  EXPECT_EQ(dtr_tensor_free(DTR_NULL), DTR_OK);  // like free(NULL)

  dtr_module lin = DTR_NULL;
  DTR_C_OK(dtr_nn_linear(2, 3, 1, &lin));
  EXPECT_EQ(dtr_tensor_numel(lin, &n), DTR_ERR_INVALID_HANDLE);  // a module is not a tensor
  EXPECT_THAT(last_error(), HasSubstr("invalid tensor handle"));
  EXPECT_EQ(dtr_tensor_free(lin), DTR_ERR_INVALID_HANDLE);
  EXPECT_EQ(dtr_optimizer_step(lin), DTR_ERR_INVALID_HANDLE);
  EXPECT_EQ(dtr_scope_end(lin), DTR_ERR_INVALID_HANDLE);
  DTR_C_OK(dtr_module_free(lin));
}

TEST_F(CApiTest, FreedHandlesAreInvalidAndNeverReachANewerObject) {
  dtr_tensor a = make({1, 2}, {2});
  DTR_C_OK(dtr_tensor_free(a));
  int64_t n = 0;
  EXPECT_EQ(dtr_tensor_numel(a, &n), DTR_ERR_INVALID_HANDLE);  // use after free: a code, no ASan report
  EXPECT_EQ(dtr_tensor_free(a), DTR_ERR_INVALID_HANDLE);       // double free
  EXPECT_EQ(dtr_op_call("neg", &a, 1, DTR_NULL, &a, 1, nullptr), DTR_ERR_INVALID_HANDLE);

  // The slot is reused with a new generation: the old id stays invalid.
  dtr_tensor b = make({1, 2, 3}, {3});
  EXPECT_NE(a, b);
  EXPECT_EQ(uint32_t(a), uint32_t(b)) << "the freed slot is reused";
  EXPECT_EQ(dtr_tensor_numel(a, &n), DTR_ERR_INVALID_HANDLE);
  DTR_C_OK(dtr_tensor_numel(b, &n));
  EXPECT_EQ(n, 3);

  dtr_attrs at = DTR_NULL;
  DTR_C_OK(dtr_attrs_new(&at));
  DTR_C_OK(dtr_attrs_free(at));
  EXPECT_EQ(dtr_attrs_set_int(at, "dim", 0), DTR_ERR_INVALID_HANDLE);
  dtr_tensor out = DTR_NULL;
  EXPECT_EQ(dtr_op_call("neg", &b, 1, at, &out, 1, nullptr), DTR_ERR_INVALID_HANDLE);
  EXPECT_EQ(out, DTR_NULL);  // out-parameters are written only on success
  DTR_C_OK(dtr_tensor_free(b));
}

// ---- tensors ------------------------------------------------------------------

TEST_F(CApiTest, TensorRoundTripAndQueries) {
  dtr_tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(read(t), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  size_t ndim = 0;
  DTR_C_OK(dtr_tensor_ndim(t, &ndim));
  EXPECT_EQ(ndim, 2u);
  int64_t shape[4] = {};
  DTR_C_OK(dtr_tensor_shape(t, shape, 4, &ndim));
  EXPECT_EQ(shape[0], 2);
  EXPECT_EQ(shape[1], 3);
  EXPECT_EQ(dtr_tensor_shape(t, shape, 1, &ndim), DTR_ERR_VALUE);
  dtr_dtype dt = DTR_INT64;
  DTR_C_OK(dtr_tensor_dtype(t, &dt));
  EXPECT_EQ(dt, DTR_FLOAT32);
  dtr_device_type type = DTR_DEVICE_CUDA;
  int index = -1;
  DTR_C_OK(dtr_tensor_device(t, &type, &index));
  EXPECT_EQ(type, DTR_DEVICE_CPU);
  EXPECT_EQ(index, 0);
  const char* text = nullptr;
  DTR_C_OK(dtr_tensor_str(t, &text));
  EXPECT_THAT(std::string(text), HasSubstr("2, 3"));

  // A wrong buffer size, a negative dim, data that does not match the shape.
  std::vector<float> small(5);
  EXPECT_EQ(dtr_tensor_to_data(t, small.data(), small.size() * sizeof(float)), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("24 bytes, the buffer 20"));
  const int64_t bad_shape[2] = {2, -3};
  dtr_tensor u = DTR_NULL;
  EXPECT_EQ(dtr_tensor_from_data(small.data(), 20, DTR_FLOAT32, bad_shape, 2, &u), DTR_ERR_VALUE);
  const int64_t shape5[1] = {5};
  EXPECT_EQ(dtr_tensor_from_data(small.data(), 16, DTR_FLOAT32, shape5, 1, &u), DTR_ERR_VALUE);
  const int64_t huge[3] = {int64_t(1) << 40, int64_t(1) << 40, 4};
  EXPECT_EQ(dtr_tensor_from_data(small.data(), 20, DTR_FLOAT32, huge, 3, &u), DTR_ERR_VALUE);
  EXPECT_EQ(u, DTR_NULL);
  double item = 0;
  EXPECT_EQ(dtr_tensor_item_double(t, &item), DTR_ERR_VALUE);  // six elements
  EXPECT_EQ(dtr_tensor_to_device(t, DTR_DEVICE_CPU, 3, &u), DTR_ERR_DEVICE);

  // Integer tensors and a 0-d one.
  const int64_t iv = 41;
  dtr_tensor s = DTR_NULL;
  DTR_C_OK(dtr_tensor_from_data(&iv, sizeof iv, DTR_INT64, nullptr, 0, &s));
  int64_t got = 0;
  DTR_C_OK(dtr_tensor_item_int64(s, &got));
  EXPECT_EQ(got, 41);
  dtr_tensor s2 = DTR_NULL;
  DTR_C_OK(dtr_tensor_retain(s, &s2));
  DTR_C_OK(dtr_tensor_free(s));
  DTR_C_OK(dtr_tensor_item_int64(s2, &got));  // the other handle keeps it alive
  EXPECT_EQ(got, 41);
  DTR_C_OK(dtr_tensor_free(s2));
  DTR_C_OK(dtr_tensor_free(t));

  // A floating value int64 cannot hold is a ValueError, not undefined
  // behaviour (what the C API fuzzer found with 9.9e24).
  for (const float fv : {9.9e24f, -9.9e24f, std::numeric_limits<float>::quiet_NaN()}) {
    dtr_tensor f = DTR_NULL;
    DTR_C_OK(dtr_tensor_from_data(&fv, sizeof fv, DTR_FLOAT32, nullptr, 0, &f));
    EXPECT_EQ(dtr_tensor_item_int64(f, &got), DTR_ERR_VALUE) << fv;
    EXPECT_NE(std::string(dtr_last_error()).find("overflow"), std::string::npos);
    DTR_C_OK(dtr_tensor_free(f));
  }
  const float three = 3.75f;
  dtr_tensor f = DTR_NULL;
  DTR_C_OK(dtr_tensor_from_data(&three, sizeof three, DTR_FLOAT32, nullptr, 0, &f));
  DTR_C_OK(dtr_tensor_item_int64(f, &got));
  EXPECT_EQ(got, 3);  // truncated toward zero, as int(3.75)
  DTR_C_OK(dtr_tensor_free(f));
}

TEST_F(CApiTest, DLPackRoundTrip) {
  dtr_tensor t = make({1, 2, 3, 4}, {2, 2});
  DLManagedTensor* m = nullptr;
  DTR_C_OK(dtr_tensor_to_dlpack(t, 1, &m));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.shape[1], 2);
  dtr_tensor u = DTR_NULL;
  DTR_C_OK(dtr_tensor_from_dlpack(m, &u));  // u owns m: no copy, the same bytes
  EXPECT_EQ(read(u), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(dtr_tensor_from_dlpack(nullptr, &u), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_tensor_to_dlpack(t, 0, nullptr), DTR_ERR_INVALID_ARGUMENT);
  // A consumer that only reads and lets go: its deleter unpins the storage.
  DLManagedTensor* ro = nullptr;
  DTR_C_OK(dtr_tensor_to_dlpack(t, 1, &ro));
  EXPECT_EQ(static_cast<const float*>(ro->dl_tensor.data)[3], 4.0f);
  ro->deleter(ro);
  DTR_C_OK(dtr_tensor_free(u));
  DTR_C_OK(dtr_tensor_free(t));
}

// ---- ops by name -----------------------------------------------------------------

TEST_F(CApiTest, OpsByNameWithAttributes) {
  dtr_tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3});
  dtr_attrs a = ints_attr("dims", {1});
  DTR_C_OK(dtr_attrs_set_bool(a, "keepdim", 1));
  dtr_tensor s = call("sum", {t}, a);
  EXPECT_EQ(read(s), (std::vector<float>{6, 15}));
  int64_t shape[2] = {};
  DTR_C_OK(dtr_tensor_shape(s, shape, 2, nullptr));
  EXPECT_EQ(shape[1], 1);
  // Setting a name again replaces it.
  DTR_C_OK(dtr_attrs_set_bool(a, "keepdim", 0));
  dtr_tensor s1 = call("sum", {t}, a);
  size_t ndim = 0;
  DTR_C_OK(dtr_tensor_ndim(s1, &ndim));
  EXPECT_EQ(ndim, 1u);
  // Defaults of optional parameters are filled in: add's alpha.
  dtr_tensor twice = call("add", {t, t});
  EXPECT_EQ(read(twice), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  // A factory: no inputs, everything in attributes.
  dtr_attrs fa = ints_attr("shape", {2});
  DTR_C_OK(dtr_attrs_set_dtype(fa, "dtype", DTR_FLOAT32));
  DTR_C_OK(dtr_attrs_set_int(fa, "device_type", DTR_DEVICE_CPU));
  DTR_C_OK(dtr_attrs_set_int(fa, "device_index", 0));
  DTR_C_OK(dtr_attrs_set_float(fa, "value", 2.5));
  dtr_tensor full = call("full", {}, fa);
  EXPECT_EQ(read(full), (std::vector<float>{2.5f, 2.5f}));

  size_t count = 0;
  DTR_C_OK(dtr_op_count(&count));
  EXPECT_GT(count, 100u);
  const char* name = nullptr;
  DTR_C_OK(dtr_op_name(0, &name));
  EXPECT_GT(std::strlen(name), 0u);
  EXPECT_EQ(dtr_op_name(count, &name), DTR_ERR_INDEX);
  const char* params = nullptr;
  int inputs = 0;
  DTR_C_OK(dtr_op_params("sum", &params, nullptr));
  EXPECT_STREQ(params, "dims (ints), keepdim (bool)");
  DTR_C_OK(dtr_op_params("add", &params, &inputs));
  EXPECT_EQ(inputs, 2);

  for (dtr_tensor x : {t, s, s1, twice, full}) DTR_C_OK(dtr_tensor_free(x));
  DTR_C_OK(dtr_attrs_free(a));
  DTR_C_OK(dtr_attrs_free(fa));
}

TEST_F(CApiTest, UnknownOpsAndWrongAttributesNameThem) {
  dtr_tensor t = make({1, 2, 3}, {3});
  dtr_tensor out = DTR_NULL;
  EXPECT_EQ(dtr_op_call("no_such_op", &t, 1, DTR_NULL, &out, 1, nullptr), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("no_such_op"));
  const char* params = nullptr;
  EXPECT_EQ(dtr_op_params("no_such_op", &params, nullptr), DTR_ERR_VALUE);

  // An attribute the op does not declare.
  dtr_attrs a = ints_attr("dimz", {0});
  EXPECT_EQ(dtr_op_call("sum", &t, 1, a, &out, 1, nullptr), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("dimz"));
  EXPECT_THAT(last_error(), HasSubstr("sum"));
  // A declared attribute of another type.
  DTR_C_OK(dtr_attrs_clear(a));
  DTR_C_OK(dtr_attrs_set_int(a, "dims", 0));
  EXPECT_EQ(dtr_op_call("sum", &t, 1, a, &out, 1, nullptr), DTR_ERR_TYPE);
  EXPECT_THAT(last_error(), HasSubstr("dims"));
  // A required attribute left out.
  DTR_C_OK(dtr_attrs_clear(a));
  EXPECT_EQ(dtr_op_call("softmax", &t, 1, a, &out, 1, nullptr), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("dim"));
  // A name longer than any parameter's.
  EXPECT_EQ(dtr_attrs_set_int(a, std::string(40, 'x').c_str(), 0), DTR_ERR_VALUE);
  EXPECT_EQ(dtr_attrs_set_int(a, nullptr, 0), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_attrs_set_ints(a, "dims", nullptr, 2), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, DTR_NULL);
  DTR_C_OK(dtr_attrs_free(a));
  DTR_C_OK(dtr_tensor_free(t));
}

TEST_F(CApiTest, WrongInputCountsAreValueErrors) {
  dtr_tensor t = make({1, 2, 3}, {3});
  dtr_tensor in[3] = {t, t, t};
  dtr_tensor out = DTR_NULL;
  EXPECT_EQ(dtr_op_call("add", in, 1, DTR_NULL, &out, 1, nullptr), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("add: expected 2 inputs, got 1"));
  EXPECT_EQ(dtr_op_call("neg", in, 3, DTR_NULL, &out, 1, nullptr), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("neg: expected 1 input, got 3"));
  EXPECT_EQ(dtr_op_call("where", in, 0, DTR_NULL, &out, 1, nullptr), DTR_ERR_VALUE);
  EXPECT_EQ(dtr_op_call("relu_backward", in, 1, DTR_NULL, &out, 1, nullptr), DTR_ERR_VALUE);
  // Outputs that do not fit: an error, and no handle made.
  EXPECT_EQ(dtr_op_call("neg", in, 1, DTR_NULL, nullptr, 0, nullptr), DTR_ERR_VALUE);
  dtr_tensor none[1];
  EXPECT_EQ(dtr_op_call("neg", in, 1, DTR_NULL, none, 0, nullptr), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("1 results do not fit in an array of 0"));
  EXPECT_EQ(out, DTR_NULL);
  DTR_C_OK(dtr_tensor_free(t));
}

TEST_F(CApiTest, InPlaceOpOnARepeatedHandle) {
  dtr_tensor t = make({1, 2, 3}, {3});
  dtr_tensor in[2] = {t, t};
  dtr_tensor out = DTR_NULL;
  DTR_C_OK(dtr_op_call("add_", in, 2, DTR_NULL, &out, 1, nullptr));  // x.add_(x)
  EXPECT_EQ(read(t), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(read(out), (std::vector<float>{2, 4, 6}));
  DTR_C_OK(dtr_tensor_free(out));
  DTR_C_OK(dtr_tensor_free(t));
}

// ---- autograd and scopes ------------------------------------------------------------

TEST_F(CApiTest, BackwardGradAndNoGrad) {
  dtr_tensor x = make({1, 2, 3}, {3});
  DTR_C_OK(dtr_tensor_set_requires_grad(x, 1));
  dtr_tensor y = call("mul", {x, x});
  dtr_attrs all = ints_attr("dims", {0});
  dtr_tensor s = call("sum", {y}, all);
  DTR_C_OK(dtr_tensor_backward(s, DTR_NULL, 0));
  dtr_tensor g = DTR_NULL;
  DTR_C_OK(dtr_tensor_grad(x, &g));
  ASSERT_NE(g, DTR_NULL);
  EXPECT_EQ(read(g), (std::vector<float>{2, 4, 6}));
  DTR_C_OK(dtr_tensor_zero_grad(x));
  dtr_tensor none = 1;
  DTR_C_OK(dtr_tensor_grad(x, &none));
  EXPECT_EQ(none, DTR_NULL);
  EXPECT_EQ(dtr_tensor_backward(s, s, 0), DTR_ERR_INVALID_ARGUMENT);

  dtr_scope ng = DTR_NULL;
  DTR_C_OK(dtr_no_grad_begin(&ng));
  int enabled = 1;
  DTR_C_OK(dtr_grad_enabled(&enabled));
  EXPECT_EQ(enabled, 0);
  dtr_tensor z = call("mul", {x, x});
  int rg = 1;
  DTR_C_OK(dtr_tensor_requires_grad(z, &rg));
  EXPECT_EQ(rg, 0);
  DTR_C_OK(dtr_scope_end(ng));
  DTR_C_OK(dtr_grad_enabled(&enabled));
  EXPECT_EQ(enabled, 1);
  EXPECT_EQ(dtr_scope_end(ng), DTR_ERR_INVALID_HANDLE);  // ended already

  dtr_tensor d = DTR_NULL;
  DTR_C_OK(dtr_tensor_detach(y, &d));
  DTR_C_OK(dtr_tensor_requires_grad(d, &rg));
  EXPECT_EQ(rg, 0);
  for (dtr_tensor h : {x, y, s, g, z, d}) DTR_C_OK(dtr_tensor_free(h));
  DTR_C_OK(dtr_attrs_free(all));
}

TEST_F(CApiTest, ScopesEndOnTheirThreadInnermostFirst) {
  dtr_scope ng = DTR_NULL, ac = DTR_NULL;
  DTR_C_OK(dtr_no_grad_begin(&ng));
  EXPECT_EQ(dtr_autocast_begin(DTR_FLOAT32, &ac), DTR_ERR_VALUE);
  DTR_C_OK(dtr_autocast_begin(DTR_BFLOAT16, &ac));

  // Another thread: its own grad mode, and it cannot end this thread's scope.
  dtr_status other_end = DTR_OK;
  int other_enabled = 0;
  std::thread([&] {
    other_end = dtr_scope_end(ng);
    dtr_grad_enabled(&other_enabled);
  }).join();
  EXPECT_EQ(other_end, DTR_ERR_WRONG_THREAD);
  EXPECT_EQ(other_enabled, 1);

  EXPECT_EQ(dtr_scope_end(ng), DTR_ERR_INVALID_ARGUMENT);  // autocast was opened after it
  EXPECT_THAT(last_error(), HasSubstr("innermost first"));
  DTR_C_OK(dtr_scope_end(ac));
  int enabled = 1;
  DTR_C_OK(dtr_grad_enabled(&enabled));
  EXPECT_EQ(enabled, 0);
  DTR_C_OK(dtr_scope_end(ng));
  DTR_C_OK(dtr_grad_enabled(&enabled));
  EXPECT_EQ(enabled, 1);
}

TEST_F(CApiTest, AScopeLeftOpenByAnExitedThreadIsFreedFromAnother) {
  dtr_scope left = DTR_NULL;
  std::thread([&] { dtr_no_grad_begin(&left); }).join();
  ASSERT_NE(left, DTR_NULL);
  DTR_C_OK(dtr_scope_end(left));  // nothing to restore on this thread
  int enabled = 0;
  DTR_C_OK(dtr_grad_enabled(&enabled));
  EXPECT_EQ(enabled, 1);
}

// ---- objects in use -------------------------------------------------------------------

TEST_F(CApiTest, AnObjectInUseIsBusyNotRaced) {
  dtr_module lin = DTR_NULL;
  DTR_C_OK(dtr_nn_linear(3, 2, 1, &lin));
  dtr_tensor x = make({1, 2, 3}, {1, 3});
  dtr_tensor y = DTR_NULL;
  {
    // What a forward running on another thread holds.
    Use busy;
    use<Object>(lin, Kind::kModule, Access::kWrite, busy);
    EXPECT_EQ(dtr_module_forward(lin, x, &y), DTR_ERR_BUSY);
    EXPECT_EQ(dtr_module_train(lin, 0), DTR_ERR_BUSY);
    EXPECT_EQ(dtr_module_free(lin), DTR_ERR_BUSY);
    size_t n = 0;
    EXPECT_EQ(dtr_module_parameters(lin, nullptr, 0, &n), DTR_ERR_BUSY);
  }
  DTR_C_OK(dtr_module_forward(lin, x, &y));
  {
    // Reads share a tensor; a change waits for them.
    Use reading;
    use<Object>(x, Kind::kTensor, Access::kRead, reading);
    int64_t n = 0;
    DTR_C_OK(dtr_tensor_numel(x, &n));
    dtr_tensor y2 = DTR_NULL;
    DTR_C_OK(dtr_module_forward(lin, x, &y2));
    DTR_C_OK(dtr_tensor_free(y2));
    EXPECT_EQ(dtr_tensor_set_requires_grad(x, 1), DTR_ERR_BUSY);
    EXPECT_EQ(dtr_tensor_free(x), DTR_ERR_BUSY);
  }
  DTR_C_OK(dtr_tensor_free(y));
  DTR_C_OK(dtr_tensor_free(x));
  DTR_C_OK(dtr_module_free(lin));
}

TEST_F(CApiTest, TwoThreadsOnOneModuleGetOkOrBusy) {
  dtr_module lin = DTR_NULL;
  DTR_C_OK(dtr_nn_linear(64, 64, 1, &lin));
  std::vector<float> xv(32 * 64, 0.5f);
  dtr_tensor x = make(xv, {32, 64});
  std::atomic<int> ok{0}, busy{0}, other{0};
  auto hammer = [&] {
    for (int i = 0; i < 200; ++i) {
      dtr_tensor y = DTR_NULL;
      const dtr_status s = dtr_module_forward(lin, x, &y);
      (s == DTR_OK ? ok : s == DTR_ERR_BUSY ? busy : other)++;
      if (s == DTR_OK) dtr_tensor_free(y);
    }
  };
  std::thread a(hammer), b(hammer);
  a.join();
  b.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load() + busy.load(), 400);
  EXPECT_GT(ok.load(), 0);
  DTR_C_OK(dtr_tensor_free(x));
  DTR_C_OK(dtr_module_free(lin));
}

// ---- out of memory --------------------------------------------------------------------

TEST_F(CApiTest, OutOfMemoryUnderATinyBudgetThenRecovery) {
  int64_t before = 0;
  DTR_C_OK(dtr_memory_budget(DTR_DEVICE_CPU, 0, &before));
  dtr_attrs a = ints_attr("shape", {512, 512});
  DTR_C_OK(dtr_attrs_set_dtype(a, "dtype", DTR_FLOAT32));
  DTR_C_OK(dtr_attrs_set_int(a, "device_type", DTR_DEVICE_CPU));
  DTR_C_OK(dtr_attrs_set_int(a, "device_index", 0));
  double stats[DTR_STAT_COUNT];
  DTR_C_OK(dtr_stats(DTR_DEVICE_CPU, 0, stats, DTR_STAT_COUNT));
  // Room for what is resident now plus 4 KiB: a 1 MiB tensor cannot fit.
  const int64_t tiny = int64_t(stats[DTR_STAT_RESIDENT_BYTES]) + 4096;
  DTR_C_OK(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, tiny));
  dtr_tensor t = DTR_NULL;
  size_t n = 7;
  EXPECT_EQ(dtr_op_call("randn", nullptr, 0, a, &t, 1, &n), DTR_ERR_OUT_OF_MEMORY);
  EXPECT_THAT(last_error(), HasSubstr("randn"));
  EXPECT_EQ(t, DTR_NULL);
  EXPECT_EQ(n, 7u);
  EXPECT_EQ(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, 0), DTR_ERR_VALUE);

  // Recovery: the same call succeeds once the budget is lifted.
  DTR_C_OK(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, -1));
  DTR_C_OK(dtr_op_call("randn", nullptr, 0, a, &t, 1, &n));
  EXPECT_EQ(n, 1u);
  DTR_C_OK(dtr_stats(DTR_DEVICE_CPU, 0, stats, DTR_STAT_COUNT));
  EXPECT_EQ(stats[DTR_STAT_BUDGET_BYTES], -1);
  DTR_C_OK(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, before));
  DTR_C_OK(dtr_tensor_free(t));
  DTR_C_OK(dtr_attrs_free(a));
}

TEST_F(CApiTest, StatsFillOnlyWhatTheCallerAsksFor) {
  DTR_C_OK(dtr_reset_stats());
  double v[4] = {-7, -7, -7, -7};
  DTR_C_OK(dtr_stats(DTR_DEVICE_CPU, 0, v, 3));
  EXPECT_GE(v[DTR_STAT_RESIDENT_BYTES], 0);
  EXPECT_EQ(v[DTR_STAT_PEAK_BYTES], v[DTR_STAT_RESIDENT_BYTES]);  // just reset
  EXPECT_EQ(v[3], -7);
  EXPECT_EQ(dtr_stats(DTR_DEVICE_CUDA, 0, v, 3), DTR_ERR_DEVICE);  // no CUDA in this build
}

// ---- options and seed ----------------------------------------------------------------

TEST_F(CApiTest, OptionsAreParsedAsTheEnvironmentIs) {
  DTR_C_OK(dtr_set_option("DTR_HEURISTIC", "lru"));
  DTR_C_OK(dtr_set_option("DTR_HEURISTIC", ""));  // back to the default
  EXPECT_EQ(dtr_set_option("DTR_HEURISTIC", "bogus"), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("DTR_HEURISTIC"));
  EXPECT_EQ(dtr_set_option("DTR_NO_SUCH_OPTION", "1"), DTR_ERR_VALUE);
  DTR_C_OK(dtr_set_option("DTR_THRASH_LIMIT", "64"));
  EXPECT_EQ(remat::Runtime::global().thrash_limit(), 64);
  DTR_C_OK(dtr_set_option("DTR_THRASH_LIMIT", ""));
  DTR_C_OK(dtr_set_option("DTR_ONEDNN_GEMM", "on"));
  EXPECT_TRUE(global_options().onednn_gemm);
  DTR_C_OK(dtr_set_option("DTR_ONEDNN_GEMM", ""));
  EXPECT_FALSE(global_options().onednn_gemm);
  DTR_C_OK(dtr_set_option("DTR_COLLECTIVE_TIMEOUT", "30"));
  EXPECT_EQ(global_options().collective_timeout_seconds, 30);
  DTR_C_OK(dtr_set_option("DTR_COLLECTIVE_TIMEOUT", ""));
  // Only DTR_PLAN is start-up-only: every other variable of the table sets.
  for (const OptionInfo& row : option_table()) {
    if (row.env_var == "DTR_PLAN") continue;
    EXPECT_EQ(dtr_set_option(std::string(row.env_var).c_str(), ""), DTR_OK) << row.env_var;
  }
  EXPECT_THAT(last_error(), HasSubstr("unknown option"));
  int64_t before = 0;
  DTR_C_OK(dtr_memory_budget(DTR_DEVICE_CPU, 0, &before));
  DTR_C_OK(dtr_set_option("DTR_MEMORY_BUDGET", "1GiB"));
  int64_t budget = 0;
  DTR_C_OK(dtr_memory_budget(DTR_DEVICE_CPU, 0, &budget));
  EXPECT_EQ(budget, int64_t(1) << 30);
  DTR_C_OK(dtr_set_option("DTR_MEMORY_BUDGET", ""));
  DTR_C_OK(dtr_memory_budget(DTR_DEVICE_CPU, 0, &budget));
  EXPECT_EQ(budget, -1);
  DTR_C_OK(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, before));
  // A budget for a device that is not present: DTR_ERR_DEVICE, nothing set.
  EXPECT_EQ(dtr_set_option("DTR_MEMORY_BUDGET", "cuda:0=1GiB,cpu=1GiB"), DTR_ERR_DEVICE);  // no CUDA device here
  EXPECT_THAT(last_error(), HasSubstr("cuda:0"));
  DTR_C_OK(dtr_memory_budget(DTR_DEVICE_CPU, 0, &budget));
  EXPECT_EQ(budget, before);
  // Every option of the table has a setter here, or says why not.
  DTR_C_OK(dtr_set_option("DTR_SWAP", "off"));
  EXPECT_EQ(remat::Runtime::global().swap_mode(), SwapMode::kOff);
  DTR_C_OK(dtr_set_option("DTR_SWAP", ""));
  EXPECT_EQ(remat::Runtime::global().swap_mode(), SwapMode::kAuto);
  EXPECT_EQ(dtr_set_option("DTR_SWAP", "always"), DTR_ERR_VALUE);
  EXPECT_EQ(dtr_set_option("DTR_PLAN", "/tmp/plan"), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("start-up"));
}

TEST_F(CApiTest, ManualSeedRepeatsDraws) {
  dtr_attrs a = ints_attr("shape", {4});
  DTR_C_OK(dtr_attrs_set_dtype(a, "dtype", DTR_FLOAT32));
  DTR_C_OK(dtr_attrs_set_int(a, "device_type", DTR_DEVICE_CPU));
  DTR_C_OK(dtr_attrs_set_int(a, "device_index", 0));
  DTR_C_OK(dtr_manual_seed(7));
  dtr_tensor r1 = call("randn", {}, a);
  DTR_C_OK(dtr_manual_seed(7));
  dtr_tensor r2 = call("randn", {}, a);
  EXPECT_EQ(read(r1), read(r2));
  DTR_C_OK(dtr_tensor_free(r1));
  DTR_C_OK(dtr_tensor_free(r2));
  DTR_C_OK(dtr_attrs_free(a));
}

// ---- modules and optimizers -------------------------------------------------------------

/// Fits y = 2 x0 - x1 with Linear(2, 1) and `opt`; returns the first and last loss.
std::pair<double, double> fit(dtr_module lin, dtr_optimizer opt, int steps) {
  dtr_tensor x = make({1, 0, 0, 1, 1, 1, 2, -1}, {4, 2});
  dtr_tensor y = make({2, -1, 1, 5}, {4, 1});
  double first = 0, last = 0;
  for (int i = 0; i < steps; ++i) {
    EXPECT_EQ(dtr_optimizer_zero_grad(opt), DTR_OK);
    dtr_tensor pred = DTR_NULL;
    EXPECT_EQ(dtr_module_forward(lin, x, &pred), DTR_OK) << dtr_last_error();
    dtr_tensor loss = call("mse_loss", {pred, y});
    EXPECT_EQ(dtr_tensor_backward(loss, DTR_NULL, 0), DTR_OK) << dtr_last_error();
    EXPECT_EQ(dtr_tensor_item_double(loss, i == 0 ? &first : &last), DTR_OK);
    EXPECT_EQ(dtr_optimizer_step(opt), DTR_OK) << dtr_last_error();
    dtr_tensor_free(loss);
    dtr_tensor_free(pred);
  }
  dtr_tensor_free(x);
  dtr_tensor_free(y);
  return {first, last};
}

TEST_F(CApiTest, TrainsWithSgdAndAdamW) {
  DTR_C_OK(dtr_manual_seed(0));
  for (int adam = 0; adam < 2; ++adam) {
    dtr_module lin = DTR_NULL;
    DTR_C_OK(dtr_nn_linear(2, 1, 1, &lin));
    size_t n = 0;
    DTR_C_OK(dtr_module_parameters(lin, nullptr, 0, &n));
    ASSERT_EQ(n, 2u);
    dtr_tensor params[2];
    EXPECT_EQ(dtr_module_parameters(lin, params, 1, &n), DTR_ERR_VALUE);
    DTR_C_OK(dtr_module_parameters(lin, params, 2, &n));
    dtr_optimizer opt = DTR_NULL;
    if (adam) DTR_C_OK(dtr_optim_adamw(params, 2, 0.05, 0.9, 0.999, 1e-8, 0.0, &opt));
    else DTR_C_OK(dtr_optim_sgd(params, 2, 0.05, 0.9, 0.0, 0, &opt));
    for (dtr_tensor p : params) DTR_C_OK(dtr_tensor_free(p));  // the optimizer holds its own
    double lr = 0;
    DTR_C_OK(dtr_optimizer_lr(opt, &lr));
    EXPECT_EQ(lr, 0.05);
    EXPECT_EQ(dtr_optimizer_set_lr(opt, -1), DTR_ERR_VALUE);
    const auto [first, last] = fit(lin, opt, 60);
    EXPECT_LT(last, first * 0.05) << (adam ? "AdamW" : "SGD");
    DTR_C_OK(dtr_optimizer_free(opt));
    DTR_C_OK(dtr_module_free(lin));
  }
  dtr_optimizer bad = DTR_NULL;
  EXPECT_EQ(dtr_optim_sgd(nullptr, 1, 0.1, 0, 0, 0, &bad), DTR_ERR_INVALID_ARGUMENT);
  dtr_tensor freed = make({1}, {1});
  DTR_C_OK(dtr_tensor_free(freed));
  EXPECT_EQ(dtr_optim_adamw(&freed, 1, 0.1, 0.9, 0.999, 1e-8, 0, &bad), DTR_ERR_INVALID_HANDLE);
  EXPECT_EQ(bad, DTR_NULL);
}

TEST_F(CApiTest, ModulesOfTheExamples) {
  DTR_C_OK(dtr_manual_seed(1));
  std::vector<dtr_module> mods(9, DTR_NULL);
  DTR_C_OK(dtr_nn_conv2d(1, 4, 3, 1, 1, 1, 1, &mods[0]));
  DTR_C_OK(dtr_nn_batch_norm2d(4, 1e-5, 0.1, &mods[1]));
  DTR_C_OK(dtr_nn_relu(&mods[2]));
  const int64_t norm_shape[1] = {8};
  DTR_C_OK(dtr_nn_layer_norm(norm_shape, 1, 1e-5, 1, &mods[3]));
  DTR_C_OK(dtr_nn_embedding(10, 8, &mods[4]));
  DTR_C_OK(dtr_nn_dropout(0.1, &mods[5]));
  DTR_C_OK(dtr_nn_causal_self_attention(8, 2, 0.0, 1, &mods[6]));
  DTR_C_OK(dtr_nn_gelu("tanh", &mods[7]));
  DTR_C_OK(dtr_nn_sequential(&mods[8]));
  EXPECT_EQ(dtr_nn_gelu("sigmoid", &mods[7]), DTR_ERR_VALUE);
  EXPECT_EQ(dtr_nn_dropout(1.5, &mods[7]), DTR_ERR_VALUE);
  EXPECT_EQ(dtr_nn_causal_self_attention(8, 3, 0.0, 1, &mods[7]), DTR_ERR_VALUE);

  // Conv -> BatchNorm -> ReLU on (2, 1, 5, 5).
  dtr_tensor img = make(std::vector<float>(50, 0.5f), {2, 1, 5, 5});
  dtr_tensor h = img;
  for (int i = 0; i < 3; ++i) {
    dtr_tensor next = DTR_NULL;
    DTR_C_OK(dtr_module_forward(mods[size_t(i)], h, &next));
    if (h != img) DTR_C_OK(dtr_tensor_free(h));
    h = next;
  }
  int64_t shape[4] = {};
  DTR_C_OK(dtr_tensor_shape(h, shape, 4, nullptr));
  EXPECT_EQ(std::vector<int64_t>(shape, shape + 4), (std::vector<int64_t>{2, 4, 5, 5}));
  DTR_C_OK(dtr_tensor_free(h));
  // Embedding -> LayerNorm -> attention on (1, 3) tokens.
  const int64_t tok[3] = {1, 4, 9};
  const int64_t tok_shape[2] = {1, 3};
  dtr_tensor ids = DTR_NULL;
  DTR_C_OK(dtr_tensor_from_data(tok, sizeof tok, DTR_INT64, tok_shape, 2, &ids));
  dtr_tensor e = DTR_NULL, ln = DTR_NULL, att = DTR_NULL;
  DTR_C_OK(dtr_module_forward(mods[4], ids, &e));
  DTR_C_OK(dtr_module_forward(mods[3], e, &ln));
  DTR_C_OK(dtr_module_forward(mods[6], ln, &att));
  DTR_C_OK(dtr_tensor_shape(att, shape, 4, nullptr));
  EXPECT_EQ(std::vector<int64_t>(shape, shape + 3), (std::vector<int64_t>{1, 3, 8}));
  const int64_t bad_tok = 10;
  dtr_tensor bad_ids = DTR_NULL, bad_out = DTR_NULL;
  DTR_C_OK(dtr_tensor_from_data(&bad_tok, sizeof bad_tok, DTR_INT64, nullptr, 0, &bad_ids));
  EXPECT_EQ(dtr_module_forward(mods[4], bad_ids, &bad_out), DTR_ERR_INDEX);
  // Dropout in eval mode is the identity.
  DTR_C_OK(dtr_module_train(mods[5], 0));
  dtr_tensor same = DTR_NULL;
  DTR_C_OK(dtr_module_forward(mods[5], ln, &same));
  EXPECT_EQ(read(same), read(ln));
  for (dtr_tensor t : {img, ids, e, ln, att, bad_ids, same}) DTR_C_OK(dtr_tensor_free(t));

  // Sequential: no cycles, only modules appended to a Sequential.
  dtr_module inner = DTR_NULL;
  DTR_C_OK(dtr_nn_sequential(&inner));
  DTR_C_OK(dtr_nn_sequential_append(mods[8], inner));
  EXPECT_EQ(dtr_nn_sequential_append(inner, mods[8]), DTR_ERR_VALUE);
  EXPECT_THAT(last_error(), HasSubstr("cycle"));
  EXPECT_EQ(dtr_nn_sequential_append(inner, inner), DTR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dtr_nn_sequential_append(mods[2], inner), DTR_ERR_TYPE);
  DTR_C_OK(dtr_nn_sequential_append(inner, mods[0]));
  size_t n = 0;
  DTR_C_OK(dtr_module_parameters(mods[8], nullptr, 0, &n));
  EXPECT_EQ(n, 2u);  // the conv's weight and bias, through inner
  DTR_C_OK(dtr_module_free(inner));
  for (dtr_module m : mods) DTR_C_OK(dtr_module_free(m));
}

TEST_F(CApiTest, SaveAndLoadAModule) {
  dtr::testing::TempDir dir;
  const std::string path = (dir.path / "lin.safetensors").string();
  dtr_module a = DTR_NULL, b = DTR_NULL;
  DTR_C_OK(dtr_manual_seed(2));
  DTR_C_OK(dtr_nn_linear(3, 2, 1, &a));
  DTR_C_OK(dtr_nn_linear(3, 2, 1, &b));
  DTR_C_OK(dtr_module_save(a, path.c_str()));
  DTR_C_OK(dtr_module_load(b, path.c_str()));
  dtr_tensor x = make({1, 2, 3}, {1, 3});
  dtr_tensor ya = DTR_NULL, yb = DTR_NULL;
  DTR_C_OK(dtr_module_forward(a, x, &ya));
  DTR_C_OK(dtr_module_forward(b, x, &yb));
  EXPECT_EQ(read(ya), read(yb));
  dtr_module c = DTR_NULL;
  DTR_C_OK(dtr_nn_linear(4, 2, 1, &c));
  EXPECT_EQ(dtr_module_load(c, path.c_str()), DTR_ERR_VALUE);  // other shapes
  EXPECT_EQ(dtr_module_load(c, (dir.path / "missing").c_str()), DTR_ERR_VALUE);
  EXPECT_EQ(dtr_module_save(c, nullptr), DTR_ERR_INVALID_ARGUMENT);
  for (dtr_tensor t : {x, ya, yb}) DTR_C_OK(dtr_tensor_free(t));
  for (dtr_module m : {a, b, c}) DTR_C_OK(dtr_module_free(m));
}

}  // namespace
}  // namespace dtr::capi::testing
