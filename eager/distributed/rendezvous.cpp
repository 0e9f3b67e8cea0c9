// The launcher's environment and the TCP rendezvous of process-group
// start-up (rendezvous.h).
//
// Wire format, all integers little-endian as the hosts' (every rank of a job
// runs on one architecture, as NCCL itself assumes):
//   hello, each rank > 0 to rank 0:  u32 magic, u32 version, i32 rank, i32 world
//   reply, rank 0 to each:           u32 magic, u32 status, u64 length, bytes
// where status 0 carries the payload, 1 an error message and 2 a timeout
// message. Rank 0 answers only once every rank has said hello, so no rank
// leaves the rendezvous (and goes on to start the communication library)
// while another one is missing.
#include "eager/distributed/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace dtr::distributed::detail {
namespace {

// ---- environment -------------------------------------------------------------

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

/// The decimal integer in variable `name`, within [lo, hi]; ValueError
/// naming the variable otherwise.
int env_int(const char* name, const char* value, int lo, int hi) {
  const std::string_view s(value);
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  DTR_CHECK(ec == std::errc() && end == s.data() + s.size(), ValueError,
            "init_process_group(\"nccl\"): {}=\"{}\" is not a decimal integer", name, s);
  DTR_CHECK(v >= lo && v <= hi, ValueError,
            "init_process_group(\"nccl\"): {}={} is outside [{}, {}]", name, v, lo, hi);
  return v;
}

int required_int(const char* name, int lo, int hi, std::string_view launcher_hint) {
  const char* v = env(name);
  DTR_CHECK(v != nullptr, ValueError, "init_process_group(\"nccl\"): {} is not set ({})", name,
            launcher_hint);
  return env_int(name, v, lo, hi);
}

constexpr int kMaxWorld = 1 << 20;

}  // namespace

LaunchEnv launch_env_from_environment() {
  LaunchEnv e;
  if (env("RANK") != nullptr) {
    constexpr std::string_view hint =
        "torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT";
    e.launcher = "torchrun";
    e.world_size = required_int("WORLD_SIZE", 1, kMaxWorld, hint);
    e.rank = required_int("RANK", 0, e.world_size - 1, hint);
    if (const char* v = env("LOCAL_RANK")) e.local_rank = env_int("LOCAL_RANK", v, 0, kMaxWorld);
    const char* addr = env("MASTER_ADDR");
    DTR_CHECK(addr != nullptr, ValueError, "init_process_group(\"nccl\"): MASTER_ADDR is not set ({})",
              hint);
    e.master_addr = addr;
    e.master_port = required_int("MASTER_PORT", 1, 65535, hint);
    return e;
  }
  if (env("OMPI_COMM_WORLD_RANK") != nullptr) {
    constexpr std::string_view hint = "mpirun sets OMPI_COMM_WORLD_RANK, _SIZE and _LOCAL_RANK";
    e.launcher = "mpirun";
    e.world_size = required_int("OMPI_COMM_WORLD_SIZE", 1, kMaxWorld, hint);
    e.rank = required_int("OMPI_COMM_WORLD_RANK", 0, e.world_size - 1, hint);
    if (const char* v = env("OMPI_COMM_WORLD_LOCAL_RANK"))
      e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", v, 0, kMaxWorld);
    if (const char* addr = env("MASTER_ADDR")) {
      e.master_addr = addr;
    } else {
      const char* local_size = env("OMPI_COMM_WORLD_LOCAL_SIZE");
      const bool one_host = local_size != nullptr &&
                            env_int("OMPI_COMM_WORLD_LOCAL_SIZE", local_size, 1, kMaxWorld) ==
                                e.world_size;
      DTR_CHECK(one_host, ValueError,
                "init_process_group(\"nccl\"): MASTER_ADDR is not set and the {} ranks of this "
                "mpirun job are not all on one host: set MASTER_ADDR to the host of rank 0 "
                "(mpirun -x MASTER_ADDR=...)",
                e.world_size);
      e.master_addr = "127.0.0.1";
    }
    const char* port = env("MASTER_PORT");
    e.master_port = port != nullptr ? env_int("MASTER_PORT", port, 1, 65535) : kDefaultMasterPort;
    return e;
  }
  throw ValueError(
      "init_process_group(\"nccl\"): RANK is not set: start the job with torchrun (RANK, "
      "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or mpirun (OMPI_COMM_WORLD_RANK, ...)");
}

namespace {

// ---- sockets -----------------------------------------------------------------

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x56525444;  // "DTRV"
constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxPayload = uint64_t(1) << 20;
enum Status : uint32_t { kOk = 0, kFailed = 1, kTimedOut = 2 };

struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  int32_t rank = 0;
  int32_t world = 0;
};
struct ReplyHeader {
  uint32_t magic = kMagic;
  uint32_t status = kOk;
  uint64_t length = 0;
};

/// A socket closed at scope exit.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int err) { return std::strerror(err); }

/// Milliseconds left until `deadline` (0 once past it), for poll().
int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return int(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

/// Waits for `events` on `fd`; false when the deadline passed first.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

enum class IoResult { kDone, kTimedOut, kClosed };

/// Moves exactly `n` bytes through a non-blocking socket before `deadline`:
/// sends them from `bytes` when `sending`, else receives them into it.
IoResult transfer_all(int fd, void* bytes, size_t n, bool sending, Clock::time_point deadline) {
  auto* p = static_cast<char*>(bytes);
  while (n > 0) {
    const ssize_t k = sending ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= size_t(k);
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_for(fd, sending ? POLLOUT : POLLIN, deadline)) return IoResult::kTimedOut;
    } else {
      return IoResult::kClosed;
    }
  }
  return IoResult::kDone;
}
IoResult send_all(int fd, const void* bytes, size_t n, Clock::time_point deadline) {
  return transfer_all(fd, const_cast<void*>(bytes), n, /*sending=*/true, deadline);
}
IoResult recv_all(int fd, void* bytes, size_t n, Clock::time_point deadline) {
  return transfer_all(fd, bytes, n, /*sending=*/false, deadline);
}

/// `addr` as an IPv4 address: dotted decimal, or a host name resolved to its
/// first IPv4 address. ValueError naming the text when it is neither.
in_addr resolve_ipv4(std::string_view addr) {
  const std::string a(addr);
  DTR_CHECK(!a.empty(), ValueError, "rendezvous: the address of rank 0 (MASTER_ADDR) is empty");
  const bool numeric = std::all_of(a.begin(), a.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  in_addr out{};
  if (numeric) {
    DTR_CHECK(::inet_pton(AF_INET, a.c_str(), &out) == 1, ValueError,
              "rendezvous: MASTER_ADDR \"{}\" is not an IPv4 address (four numbers 0-255 "
              "separated by dots)",
              a);
    return out;
  }
  const bool host_name = a.size() <= 253 && std::all_of(a.begin(), a.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '-' || c == '.';
                         });
  DTR_CHECK(host_name, ValueError,
            "rendezvous: MASTER_ADDR \"{}\" is neither an IPv4 address nor a host name", a);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(a.c_str(), nullptr, &hints, &found);
  DTR_CHECK(rc == 0 && found != nullptr, ValueError,
            "rendezvous: MASTER_ADDR \"{}\" does not resolve to an IPv4 address ({})", a,
            rc != 0 ? ::gai_strerror(rc) : "no address");
  out = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return out;
}

std::string endpoint(std::string_view addr, int port) { return fmt::format("{}:{}", addr, port); }

std::vector<std::byte> to_bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

struct Peer {
  Fd fd;
  int rank = -1;
};

/// Rank 0 tells every connected peer how the rendezvous ended.
void reply_all(std::vector<Peer>& peers, Status status, std::span<const std::byte> body,
               Clock::time_point deadline) {
  for (Peer& p : peers) {
    ReplyHeader h;
    h.status = status;
    h.length = body.size();
    if (send_all(p.fd.get(), &h, sizeof h, deadline) == IoResult::kDone && !body.empty())
      send_all(p.fd.get(), body.data(), body.size(), deadline);
  }
}

/// Rank 0 ends the rendezvous with an error: every connected peer is told
/// `why` (and throws it), then rank 0 throws it.
[[noreturn]] void fail_all(std::vector<Peer>& peers, const std::string& why) {
  reply_all(peers, kFailed, to_bytes(why), Clock::now() + std::chrono::seconds(1));
  throw DistributedError(why);
}

std::vector<std::byte> serve(std::string_view addr, int port, int world,
                             std::span<const std::byte> payload, double timeout_s,
                             Clock::time_point deadline) {
  const std::string where = endpoint(addr, port);
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  DTR_CHECK(listener.get() >= 0, DistributedError, "rendezvous: socket(): {}", errno_text(errno));
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Every interface, as torchrun's store does: MASTER_ADDR names this host
  // as the others reach it, which need not be an address bound here.
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    const int err = errno;
    throw DistributedError(fmt::format(
        "rendezvous: rank 0 cannot listen on port {} ({}){}", port, errno_text(err),
        err == EADDRINUSE ? ": another job holds MASTER_PORT; pick a free one" : ""));
  }
  DTR_CHECK(::listen(listener.get(), std::min(world, 4096)) == 0, DistributedError,
            "rendezvous: listen on port {}: {}", port, errno_text(errno));
  set_nonblocking(listener.get());

  std::vector<Peer> peers;
  std::vector<bool> joined(size_t(world), false);
  joined[0] = true;
  while (int(peers.size()) < world - 1) {
    if (!wait_for(listener.get(), POLLIN, deadline)) {
      std::vector<int> missing;
      for (int r = 0; r < world; ++r)
        if (!joined[size_t(r)]) missing.push_back(r);
      const std::string why = fmt::format(
          "rendezvous at {}: rank{} {} never connected within {} s (DTR_COLLECTIVE_TIMEOUT)", where,
          missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), timeout_s);
      reply_all(peers, kTimedOut, to_bytes(why), Clock::now() + std::chrono::seconds(1));
      throw CollectiveTimeoutError(why);
    }
    Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (conn.get() < 0) continue;  // the connection went away before accept
    Hello hello;
    // A connection that says nothing or something else is not one of ours
    // (a port scanner, a stale job): dropped, the rendezvous goes on.
    if (recv_all(conn.get(), &hello, sizeof hello, std::min(deadline, Clock::now() + std::chrono::seconds(5))) !=
            IoResult::kDone ||
        hello.magic != kMagic)
      continue;
    if (hello.version != kVersion)
      fail_all(peers, fmt::format("rendezvous at {}: a rank speaks protocol version {}, rank 0 version {}",
                       where, hello.version, kVersion));
    if (hello.world != world) {
      peers.push_back({std::move(conn), hello.rank});
      fail_all(peers, fmt::format("rendezvous at {}: rank {} was started with world size {}, rank 0 with {}",
                       where, hello.rank, hello.world, world));
    }
    if (hello.rank <= 0 || hello.rank >= world || joined[size_t(hello.rank)]) {
      peers.push_back({std::move(conn), hello.rank});
      fail_all(peers, fmt::format("rendezvous at {}: two processes claim rank {} (each rank must be started once)",
                       where, hello.rank));
    }
    joined[size_t(hello.rank)] = true;
    peers.push_back({std::move(conn), hello.rank});
  }
  for (Peer& p : peers) {
    ReplyHeader h;
    h.length = payload.size();
    if (send_all(p.fd.get(), &h, sizeof h, deadline) != IoResult::kDone ||
        send_all(p.fd.get(), payload.data(), payload.size(), deadline) != IoResult::kDone)
      throw DistributedError(
          fmt::format("rendezvous at {}: rank {} went away before it got rank 0's answer", where, p.rank));
  }
  return {payload.begin(), payload.end()};
}

/// Connects to rank 0, retrying while nothing listens there yet.
Fd connect_with_retries(const in_addr& ip, std::string_view addr, int port, int rank, double timeout_s,
                        Clock::time_point deadline) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  sa.sin_addr = ip;
  auto pause = std::chrono::milliseconds(10);
  std::string last_error;
  for (;;) {
    Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    DTR_CHECK(s.get() >= 0, DistributedError, "rendezvous: socket(): {}", errno_text(errno));
    int err = 0;
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        err = ETIMEDOUT;
        if (wait_for(s.get(), POLLOUT, deadline)) {
          socklen_t len = sizeof err;
          ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        }
      }
    }
    if (err == 0) {
      const int one = 1;
      ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return s;
    }
    last_error = errno_text(err);
    const auto now = Clock::now();
    if (now >= deadline)
      throw CollectiveTimeoutError(fmt::format(
          "rendezvous at {}: rank {} could not reach rank 0 within {} s (DTR_COLLECTIVE_TIMEOUT; "
          "last error: {})",
          endpoint(addr, port), rank, timeout_s, last_error));
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

std::vector<std::byte> join(const in_addr& ip, std::string_view addr, int port, int rank, int world,
                            double timeout_s, Clock::time_point deadline) {
  const std::string where = endpoint(addr, port);
  Fd s = connect_with_retries(ip, addr, port, rank, timeout_s, deadline);
  Hello hello;
  hello.rank = rank;
  hello.world = world;
  ReplyHeader h;
  const auto no_answer = [&](IoResult r) {
    if (r == IoResult::kTimedOut)
      throw CollectiveTimeoutError(fmt::format(
          "rendezvous at {}: rank {} connected, but rank 0 did not answer within {} s "
          "(DTR_COLLECTIVE_TIMEOUT)",
          where, rank, timeout_s));
    throw DistributedError(fmt::format(
        "rendezvous at {}: rank 0 closed the connection of rank {} without an answer (is "
        "another job using MASTER_PORT?)",
        where, rank));
  };
  if (IoResult r = send_all(s.get(), &hello, sizeof hello, deadline); r != IoResult::kDone)
    no_answer(r);
  // Rank 0 answers only once every rank is in: wait a little past the
  // deadline, so that its own timeout message (naming the missing ranks)
  // arrives rather than this rank's guess.
  const Clock::time_point answer_by = deadline + std::chrono::seconds(2);
  if (IoResult r = recv_all(s.get(), &h, sizeof h, answer_by); r != IoResult::kDone) no_answer(r);
  DTR_CHECK(h.magic == kMagic && h.length <= kMaxPayload, DistributedError,
            "rendezvous at {}: rank {} got a malformed answer (is another program listening on "
            "MASTER_PORT?)",
            where, rank);
  std::vector<std::byte> body(size_t(h.length));
  if (IoResult r = recv_all(s.get(), body.data(), body.size(), answer_by); r != IoResult::kDone)
    no_answer(r);
  const std::string text(reinterpret_cast<const char*>(body.data()), body.size());
  switch (h.status) {
    case kOk: return body;
    case kTimedOut: throw CollectiveTimeoutError(text);
    case kFailed: throw DistributedError(text);
    default:
      throw DistributedError(fmt::format("rendezvous at {}: rank {} got status {} from rank 0",
                                         where, rank, h.status));
  }
}

}  // namespace

std::vector<std::byte> rendezvous_broadcast(std::string_view addr, int port, int rank, int world,
                                            std::span<const std::byte> payload_from_rank0,
                                            double timeout_s) {
  DTR_CHECK(world >= 1 && rank >= 0 && rank < world, ValueError,
            "rendezvous: rank {} is outside a world of {}", rank, world);
  DTR_CHECK(port >= 1 && port <= 65535, ValueError,
            "rendezvous: port {} (MASTER_PORT) is outside [1, 65535]", port);
  DTR_CHECK(timeout_s > 0, ValueError, "rendezvous: timeout {} s is not positive", timeout_s);
  DTR_CHECK(rank != 0 || payload_from_rank0.size() <= kMaxPayload, ValueError,
            "rendezvous: payload of {} bytes exceeds {} bytes", payload_from_rank0.size(), kMaxPayload);
  const in_addr ip = resolve_ipv4(addr);
  if (world == 1) return {payload_from_rank0.begin(), payload_from_rank0.end()};
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  if (rank == 0) return serve(addr, port, world, payload_from_rank0, timeout_s, deadline);
  return join(ip, addr, port, rank, world, timeout_s, deadline);
}

}  // namespace dtr::distributed::detail
