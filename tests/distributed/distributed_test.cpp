// dtr::distributed without mpirun: the errors before any group exists, and
// a world of one (MPI's singleton start), in the ordinary test binary.
#include <gtest/gtest.h>

#include <string>

#include "core/sanitizers.h"
#include "dtr/dtr.h"
#include "eager/distributed/distributed.h"
#include "testing.h"

namespace dtr::distributed {
namespace {

using dtr::testing::allclose;
using dtr::testing::error_message;

TEST(DistributedSetup, WithoutAGroupEveryCallIsADistributedError) {
  ASSERT_FALSE(is_initialized());
  EXPECT_NE(error_message<DistributedError>([] { world(); }).find("init_process_group"), std::string::npos);
  EXPECT_NE(error_message<DistributedError>([] { get_rank(); }).find("no process group"), std::string::npos);
  Tensor t = ones({3});
  EXPECT_NE(error_message<DistributedError>([&] { all_reduce(t); }).find("no process group"), std::string::npos);
  EXPECT_NE(error_message<DistributedError>([&] { functional::all_gather(t); }).find("no process group"),
            std::string::npos);
  EXPECT_NE(error_message<DistributedError>([] { barrier(); }).find("no process group"), std::string::npos);
  EXPECT_NE(error_message<DistributedError>([] { destroy_process_group(); }).find("no process group"),
            std::string::npos);
  EXPECT_NE(error_message<DistributedError>([] { group_from_id(12345); }).find("does not exist"),
            std::string::npos);
  EXPECT_TRUE(allclose(t, {1, 1, 1}));  // nothing was written
}

TEST(DistributedSetup, UnknownBackendAndBadTimeoutAreValueErrors) {
  const std::string msg = error_message<ValueError>([] { init_process_group("gloo"); });
  EXPECT_NE(msg.find("unknown backend \"gloo\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"mpi\""), std::string::npos) << msg;
  EXPECT_NE(error_message<ValueError>([] { init_process_group("mpi", {.timeout_seconds = -1.0}); })
                .find("positive"),
            std::string::npos);
  EXPECT_FALSE(is_initialized());
}

#if DTR_TEST_HAVE_MPI
// MPI starts once per process: this test is its own process under ctest.
// Under AddressSanitizer it is skipped: OpenMPI keeps allocations until exit
// that LeakSanitizer reports, and discovered tests cannot carry the
// suppressions the mpirun tests (which cover the same paths) run with.
TEST(DistributedSetup, AWorldOfOneProcessIsTheIdentity) {
#if DTR_ADDRESS_SANITIZER
  GTEST_SKIP() << "OpenMPI's own allocations at exit are reported by LeakSanitizer";
#endif
  init_process_group("mpi", {.timeout_seconds = 30.0});
  EXPECT_EQ(get_world_size(), 1);
  EXPECT_EQ(get_rank(), 0);
  EXPECT_EQ(world()->backend_name(), "mpi");
  EXPECT_NE(error_message<DistributedError>([] { init_process_group("mpi"); }).find("already initialized"),
            std::string::npos);
  Tensor t = from_vector<float>({1.5f, -2.0f}, {2});
  all_reduce(t, ReduceOp::kMean);
  EXPECT_TRUE(allclose(t, {1.5, -2.0}));
  Tensor g = functional::all_gather(t.reshape({1, 2}));
  EXPECT_EQ(g.shape(), (Shape{1, 2}));
  barrier();
  const int64_t calls = world()->collective_calls();
  EXPECT_EQ(calls, 3);
  destroy_process_group();
  EXPECT_FALSE(is_initialized());
  // MPI stays up until exit, so a second world can start.
  init_process_group("mpi");
  EXPECT_EQ(world()->collective_calls(), 0);
  destroy_process_group();
}
#endif

}  // namespace
}  // namespace dtr::distributed
