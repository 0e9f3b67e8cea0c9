// The start-up rendezvous of process groups (eager/distributed/rendezvous.h):
// ranks are threads of this process talking over 127.0.0.1, and the
// launcher's environment as torchrun and mpirun set it.
#include "eager/distributed/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "testing.h"

namespace dtr::distributed::detail {
namespace {

using ::testing::HasSubstr;
using dtr::testing::error_message;
using Clock = std::chrono::steady_clock;

/// A socket bound to 127.0.0.1 on an ephemeral port, closed at scope exit;
/// `listening` makes it hold the port against other listeners.
struct BoundSocket {
  explicit BoundSocket(bool listening = false) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    if (listening) {
      EXPECT_EQ(::listen(fd, 4), 0);
    }
    socklen_t len = sizeof sa;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~BoundSocket() { ::close(fd); }
  int fd = -1;
  int port = 0;
};

/// A port nothing listens on (free when this returns; the race with other
/// programs picking it is negligible).
int free_port() { return BoundSocket().port; }

std::vector<std::byte> bytes_of(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

/// What one rank's call returned or threw.
struct Outcome {
  std::vector<std::byte> payload;
  std::exception_ptr error;
  std::string message() const {
    if (!error) return "";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  template <typename E>
  bool threw() const {
    if (!error) return false;
    try {
      std::rethrow_exception(error);
    } catch (const E&) {
      return true;
    } catch (...) {
      return false;
    }
  }
};

/// Runs rendezvous_broadcast for each (rank, world) in `ranks` on its own
/// thread; rank 0 sends `payload`, the others pass junk that must be ignored.
std::vector<Outcome> run_ranks(int port, const std::vector<std::pair<int, int>>& ranks,
                               const std::vector<std::byte>& payload, double timeout_s,
                               std::chrono::milliseconds rank0_delay = {}) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      const auto [rank, world] = ranks[i];
      const std::vector<std::byte> junk = bytes_of("not rank 0's payload");
      if (rank == 0) std::this_thread::sleep_for(rank0_delay);
      try {
        out[i].payload = rendezvous_broadcast("127.0.0.1", port, rank, world, rank == 0 ? payload : junk,
                                              timeout_s);
      } catch (...) {
        out[i].error = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(Rendezvous, EveryRankGetsRankZerosPayload) {
  std::vector<std::byte> payload(128);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(i * 7 + 3);
  // Rank 0 starts last: the others retry until it listens.
  const auto out = run_ranks(free_port(), {{1, 4}, {2, 4}, {3, 4}, {0, 4}}, payload, 20.0,
                             std::chrono::milliseconds(300));
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_FALSE(out[i].error) << "rank index " << i << ": " << out[i].message();
    EXPECT_EQ(out[i].payload, payload) << "rank index " << i;
  }
}

TEST(Rendezvous, WorldOfOneOpensNoSocket) {
  BoundSocket taken(/*listening=*/true);  // rank 0 could not listen here
  const std::vector<std::byte> payload = bytes_of("id");
  EXPECT_EQ(rendezvous_broadcast("127.0.0.1", taken.port, 0, 1, payload, 1.0), payload);
}

TEST(Rendezvous, TimeoutNamesTheRanksThatNeverConnected) {
  const auto t0 = Clock::now();
  const auto out = run_ranks(free_port(), {{0, 4}, {1, 4}, {3, 4}}, bytes_of("id"), 1.0);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(out[0].threw<CollectiveTimeoutError>()) << out[0].message();
  EXPECT_THAT(out[0].message(), HasSubstr("rank 2 never connected within 1 s"));
  // The ranks that did connect are told why and throw the same.
  for (int i : {1, 2}) {
    EXPECT_TRUE(out[size_t(i)].threw<CollectiveTimeoutError>()) << out[size_t(i)].message();
    EXPECT_EQ(out[size_t(i)].message(), out[0].message());
  }
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 6.0);
}

TEST(Rendezvous, RankWithoutRankZeroTimesOut) {
  const int port = free_port();
  const auto t0 = Clock::now();
  const std::string msg = error_message<CollectiveTimeoutError>(
      [&] { rendezvous_broadcast("127.0.0.1", port, 1, 2, {}, 0.5); });
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_THAT(msg, HasSubstr(fmt::format("rendezvous at 127.0.0.1:{}: rank 1 could not reach rank 0 within 0.5 s", port)));
  EXPECT_THAT(msg, HasSubstr("Connection refused"));
  EXPECT_GE(seconds, 0.45);
  EXPECT_LT(seconds, 3.0);
}

TEST(Rendezvous, MalformedAddressIsValueError) {
  const int port = free_port();
  for (const char* addr : {"127.0.0.300", "1.2.3", "", "no such host!", "10.0.0.1:80"}) {
    for (int rank : {0, 1}) {
      const std::string msg =
          error_message<ValueError>([&] { rendezvous_broadcast(addr, port, rank, 2, {}, 1.0); });
      EXPECT_THAT(msg, HasSubstr("MASTER_ADDR")) << "addr \"" << addr << "\" rank " << rank;
      if (*addr != '\0') {
        EXPECT_THAT(msg, HasSubstr(addr));
      }
    }
  }
  EXPECT_THAT(error_message<ValueError>([&] { rendezvous_broadcast("127.0.0.1", 0, 0, 2, {}, 1.0); }),
              HasSubstr("port 0 (MASTER_PORT) is outside [1, 65535]"));
  EXPECT_THAT(error_message<ValueError>([&] { rendezvous_broadcast("127.0.0.1", 70000, 1, 2, {}, 1.0); }),
              HasSubstr("port 70000"));
  EXPECT_THAT(error_message<ValueError>([&] { rendezvous_broadcast("127.0.0.1", port, 2, 2, {}, 1.0); }),
              HasSubstr("rank 2 is outside a world of 2"));
}

TEST(Rendezvous, HostNameResolves) {
  const std::vector<std::byte> payload = bytes_of("by name");
  std::vector<Outcome> out(2);
  const int port = free_port();
  std::thread server([&] {
    try {
      out[0].payload = rendezvous_broadcast("localhost", port, 0, 2, payload, 10.0);
    } catch (...) {
      out[0].error = std::current_exception();
    }
  });
  try {
    out[1].payload = rendezvous_broadcast("localhost", port, 1, 2, {}, 10.0);
  } catch (...) {
    out[1].error = std::current_exception();
  }
  server.join();
  EXPECT_FALSE(out[0].error) << out[0].message();
  EXPECT_FALSE(out[1].error) << out[1].message();
  EXPECT_EQ(out[1].payload, payload);
}

TEST(Rendezvous, PortTakenIsDistributedError) {
  BoundSocket taken(/*listening=*/true);
  EXPECT_THAT(error_message<DistributedError>(
                  [&] { rendezvous_broadcast("127.0.0.1", taken.port, 0, 2, bytes_of("id"), 1.0); }),
              HasSubstr(fmt::format("rank 0 cannot listen on port {}", taken.port)));
}

TEST(Rendezvous, WorldSizeDisagreementFailsEveryRank) {
  const auto out = run_ranks(free_port(), {{0, 2}, {1, 3}}, bytes_of("id"), 10.0);
  for (const Outcome& o : out) {
    EXPECT_TRUE(o.threw<DistributedError>() && !o.threw<CollectiveTimeoutError>()) << o.message();
    EXPECT_THAT(o.message(), HasSubstr("rank 1 was started with world size 3, rank 0 with 2"));
  }
}

TEST(Rendezvous, TwoProcessesClaimingOneRankFailEveryRank) {
  const auto out = run_ranks(free_port(), {{0, 3}, {1, 3}, {1, 3}}, bytes_of("id"), 10.0);
  for (const Outcome& o : out) {
    EXPECT_TRUE(o.threw<DistributedError>()) << o.message();
    EXPECT_THAT(o.message(), HasSubstr("two processes claim rank 1"));
  }
}

TEST(Rendezvous, StrayConnectionIsIgnored) {
  const int port = free_port();
  const std::vector<std::byte> payload = bytes_of("id");
  std::vector<Outcome> out(1);
  std::thread server([&] {
    try {
      out[0].payload = rendezvous_broadcast("127.0.0.1", port, 0, 2, payload, 10.0);
    } catch (...) {
      out[0].error = std::current_exception();
    }
  });
  // Something else connects first and sends junk, then the real rank 1.
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    if (connected) {
      const char junk[16] = "GET / HTTP/1.0\n";
      EXPECT_EQ(::send(fd, junk, sizeof junk, 0), ssize_t(sizeof junk));
    }
    ::close(fd);
    if (connected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<std::byte> got;
  EXPECT_NO_THROW(got = rendezvous_broadcast("127.0.0.1", port, 1, 2, {}, 10.0));
  server.join();
  EXPECT_FALSE(out[0].error) << out[0].message();
  EXPECT_EQ(got, payload);
}

// ---- the launcher's environment ----------------------------------------------

class LaunchEnvTest : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
  void SetUp() override {
    for (const char* name : kNames) {
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kNames) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }
  static void torchrun(const char* rank, const char* world) {
    set("RANK", rank);
    set("WORLD_SIZE", world);
    set("MASTER_ADDR", "10.1.2.3");
    set("MASTER_PORT", "29400");
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(LaunchEnvTest, Torchrun) {
  torchrun("3", "4");
  set("LOCAL_RANK", "1");
  const LaunchEnv e = launch_env_from_environment();
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.1.2.3");
  EXPECT_EQ(e.master_port, 29400);
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(launch_env_from_environment().local_rank, std::nullopt);
}

TEST_F(LaunchEnvTest, MalformedOrMissingVariablesNameThemselves) {
  const auto rejected = [](const char* name, const char* value, const char* expected) {
    torchrun("0", "2");
    unsetenv("LOCAL_RANK");
    if (value != nullptr) {
      set(name, value);
    } else {
      unsetenv(name);
    }
    const std::string msg = error_message<ValueError>([] { launch_env_from_environment(); });
    EXPECT_THAT(msg, HasSubstr(expected)) << name << "=" << (value ? value : "(unset)");
  };
  rejected("WORLD_SIZE", "abc", "WORLD_SIZE=\"abc\" is not a decimal integer");
  rejected("WORLD_SIZE", "2x", "WORLD_SIZE=\"2x\" is not a decimal integer");
  rejected("WORLD_SIZE", "0", "WORLD_SIZE=0 is outside [1, ");
  rejected("WORLD_SIZE", nullptr, "WORLD_SIZE is not set");
  rejected("RANK", "2", "RANK=2 is outside [0, 1]");
  rejected("RANK", "-1", "RANK=-1 is outside");
  rejected("LOCAL_RANK", "one", "LOCAL_RANK=\"one\" is not a decimal integer");
  rejected("MASTER_ADDR", nullptr, "MASTER_ADDR is not set");
  rejected("MASTER_PORT", nullptr, "MASTER_PORT is not set");
  rejected("MASTER_PORT", "70000", "MASTER_PORT=70000 is outside [1, 65535]");
}

TEST_F(LaunchEnvTest, NoLauncherIsValueError) {
  EXPECT_THAT(error_message<ValueError>([] { launch_env_from_environment(); }),
              HasSubstr("RANK is not set"));
}

TEST_F(LaunchEnvTest, MpirunOnOneHostDefaultsToLoopback) {
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  LaunchEnv e = launch_env_from_environment();
  EXPECT_EQ(e.launcher, "mpirun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, kDefaultMasterPort);
  set("MASTER_PORT", "31000");
  EXPECT_EQ(launch_env_from_environment().master_port, 31000);
  // Ranks on several hosts need MASTER_ADDR.
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "1");
  EXPECT_THAT(error_message<ValueError>([] { launch_env_from_environment(); }),
              HasSubstr("MASTER_ADDR is not set and the 2 ranks of this mpirun job are not all on one host"));
  set("MASTER_ADDR", "node0");
  EXPECT_EQ(launch_env_from_environment().master_addr, "node0");
  set("OMPI_COMM_WORLD_SIZE", "abc");
  EXPECT_THAT(error_message<ValueError>([] { launch_env_from_environment(); }),
              HasSubstr("OMPI_COMM_WORLD_SIZE=\"abc\""));
}

}  // namespace
}  // namespace dtr::distributed::detail
