// The communication backends behind dtr::distributed (internal). Each one
// is compiled only when its library was found (DTR_HAVE_MPI, DTR_HAVE_NCCL,
// set by CMakeLists.txt on the dtr target); distributed.cpp asks for them by
// name.
#pragma once

#include <memory>
#include <vector>

#include "eager/distributed/distributed.h"

namespace dtr::distributed::detail {

/// Starts the library if needed and returns the world group of this
/// process (mpi.cpp). Throws DistributedError when MPI fails to start.
std::shared_ptr<ProcessGroup> mpi_init_world(double timeout_seconds);
/// A sub-group of the MPI world with the world ranks `ranks` (sorted,
/// distinct, validated by the caller); collective over the world.
std::shared_ptr<ProcessGroup> mpi_new_group(ProcessGroup& world, const std::vector<int>& ranks);

/// The NCCL world group (nccl.cpp): one CUDA device per rank (LOCAL_RANK,
/// else rank modulo the visible devices), the unique id exchanged through
/// a TCP rendezvous at MASTER_ADDR:MASTER_PORT (under mpirun, defaults
/// 127.0.0.1:29500 when every rank is on one host).
/// Throws DeviceError when no CUDA device is present, DistributedError when
/// NCCL fails, ValueError for a missing or malformed environment variable.
std::shared_ptr<ProcessGroup> nccl_init_world(double timeout_seconds);
std::shared_ptr<ProcessGroup> nccl_new_group(ProcessGroup& world, const std::vector<int>& ranks);

/// Which backends were built in.
bool mpi_available();
bool nccl_available();

}  // namespace dtr::distributed::detail
