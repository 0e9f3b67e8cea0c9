// Start-up of a process group outside any communication library (internal):
// the launcher's environment (torchrun's RANK, WORLD_SIZE, ... or mpirun's
// OMPI_COMM_WORLD_*) and a one-shot TCP rendezvous that hands every rank a
// few bytes from rank 0 (the nccl backend's ncclUniqueId). Plain POSIX
// sockets over IPv4, so it builds and is tested without NCCL or a GPU.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtr::distributed::detail {

/// Where this process sits in the job, as the launcher described it.
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;  // index among the ranks of this host
  std::string master_addr;        // rank 0's host (IPv4 address or host name)
  int master_port = 0;
  /// "torchrun" or "mpirun": which set of variables it came from.
  std::string_view launcher;
};

/// torchrun's default MASTER_PORT, used under mpirun when MASTER_PORT is unset.
inline constexpr int kDefaultMasterPort = 29500;

/// Reads the launcher's environment. torchrun-style RANK, WORLD_SIZE,
/// LOCAL_RANK (optional), MASTER_ADDR and MASTER_PORT when RANK is set;
/// otherwise mpirun's OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE and
/// OMPI_COMM_WORLD_LOCAL_RANK, with MASTER_ADDR defaulting to 127.0.0.1 when
/// every rank is on one host (OMPI_COMM_WORLD_LOCAL_SIZE equals the world
/// size) and MASTER_PORT to 29500. Throws ValueError naming the variable
/// that is missing or malformed (not a decimal integer, a rank outside
/// [0, world size), a world size below 1, a port outside [1, 65535]).
LaunchEnv launch_env_from_environment();

/// Hands every rank of a job the bytes `payload_from_rank0` of rank 0.
/// Rank 0 listens on `addr`:`port` (IPv4; a host name is resolved) until the
/// other `world - 1` ranks have connected, then sends the payload to each;
/// the others connect, retrying while rank 0 is not listening yet. Every rank
/// returns the payload (rank 0 its own copy; the argument is ignored on the
/// others). A world of one returns at once without opening a socket.
/// Payloads are at most 1 MiB.
///
/// Throws ValueError for a malformed address, a port outside [1, 65535] or a
/// rank outside [0, world); DistributedError when rank 0 cannot listen (the
/// port is taken), two processes claim the same rank or disagree on the world
/// size (every connected rank then throws, naming them), or a peer breaks the
/// protocol; CollectiveTimeoutError after `timeout_s` seconds: on rank 0
/// naming the ranks that never connected (the connected ones are told and
/// throw it too), on another rank when rank 0 never answered.
std::vector<std::byte> rendezvous_broadcast(std::string_view addr, int port, int rank, int world,
                                            std::span<const std::byte> payload_from_rank0,
                                            double timeout_s);

}  // namespace dtr::distributed::detail
