// Reproducers of what tests/fuzz/fuzz_c_api found in the C API, as tests of
// dtr_tests (which links dtr_c). They fail under the sanitizer build
// (build-asan, -fsanitize=undefined) until the C API is fixed.
#include <cstdint>

#include <gtest/gtest.h>

#include "dtr/dtr_c.h"

namespace {

// A C caller may pass any int as a dtr_dtype. The enum's enumerators span
// 0..7, so in C++ a dtr_dtype parameter holding -1 or 99 is outside the
// enum's range: reading the parameter (to_dtype(dtype) in dtr_c.cpp) is
// undefined behaviour that UBSan reports ("load of value 4294967295, which
// is not a valid value for type 'dtr_dtype'") before the range check runs.
// A fixed 32-bit range for the enums (an enumerator 0x7fffffff, as Vulkan's
// *_MAX_ENUM) makes every int a valid value.
TEST(CApiFuzzRegression, DtypeOutsideTheEnumIsAnInvalidArgument) {
  const float value = 1.0f;
  const int64_t shape[1] = {1};
  for (const int bad : {-1, 8, 99}) {
    dtr_tensor t = DTR_NULL;
    EXPECT_EQ(dtr_tensor_from_data(&value, sizeof value, static_cast<dtr_dtype>(bad), shape, 1, &t),
              DTR_ERR_INVALID_ARGUMENT)
        << bad;
    EXPECT_EQ(t, DTR_NULL);
  }
}

}  // namespace
