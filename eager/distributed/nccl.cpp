// The nccl backend of dtr::distributed (placeholder until the backend lands).
#if DTR_HAVE_NCCL
#include "core/error.h"
#include "eager/distributed/backends.h"

namespace dtr::distributed::detail {
bool nccl_available() { return true; }
std::shared_ptr<ProcessGroup> nccl_init_world(double) {
  throw NotImplementedError("init_process_group(\"nccl\"): the nccl backend is not built yet");
}
std::shared_ptr<ProcessGroup> nccl_new_group(ProcessGroup&, const std::vector<int>&) {
  throw NotImplementedError("new_group: the nccl backend is not built yet");
}
}  // namespace dtr::distributed::detail
#endif
