/* dtr_c.h compiled as strict C11 (-Wall -Wextra -Werror -pedantic), and a
 * few calls through it: the version, a tensor round trip, an op by name, a
 * status code and its message. Exits 0 on success (run by ctest). */
#include <dtr/dtr_c.h>

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                               \
  do {                                                                            \
    dtr_status s_ = (call);                                                       \
    if (s_ != DTR_OK) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,          \
              dtr_status_name(s_), dtr_last_error());                             \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

int main(void) {
  int major = -1, minor = -1, patch = -1;
  CHECK(dtr_version(&major, &minor, &patch));
  if (major != DTR_C_VERSION_MAJOR || strlen(dtr_version_string()) == 0) return 1;

  const float data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[2] = {2, 3};
  dtr_tensor x = DTR_NULL, y = DTR_NULL;
  CHECK(dtr_tensor_from_data(data, sizeof data, DTR_FLOAT32, shape, 2, &x));
  dtr_tensor in[2];
  in[0] = x;
  in[1] = x;
  size_t n = 0;
  CHECK(dtr_op_call("add", in, 2, DTR_NULL, &y, 1, &n));
  float back[6];
  CHECK(dtr_tensor_to_data(y, back, sizeof back));
  if (n != 1 || back[5] != 12.0f) return 1;

  /* A freed handle is an error code, not a crash. */
  CHECK(dtr_tensor_free(y));
  if (dtr_tensor_free(y) != DTR_ERR_INVALID_HANDLE) return 1;
  if (strstr(dtr_last_error(), "invalid tensor handle") == NULL) return 1;
  if (dtr_op_call("no_such_op", in, 1, DTR_NULL, &y, 1, &n) != DTR_ERR_VALUE) return 1;
  CHECK(dtr_tensor_free(x));

  size_t live = 1;
  CHECK(dtr_live_handles(&live));
  if (live != 0) return 1;
  printf("dtr %s: C11 header check passed\n", dtr_version_string());
  return 0;
}
