// The main of dtr_mpi_tests: every rank of `mpirun -np N dtr_mpi_tests`
// runs every test; the world group is initialized before the first test and
// destroyed after the last. Only rank 0 prints gtest's progress, but a
// failure on any rank prints there and fails that rank's exit code, which
// fails mpirun's.
#include <gtest/gtest.h>

#include <cstdio>

#include "eager/distributed/distributed.h"

namespace {

/// Drops the per-test output of every rank but 0 (failures still print).
class QuietRank : public testing::EmptyTestEventListener {
 public:
  explicit QuietRank(testing::TestEventListener* inner) : inner_(inner) {}
  ~QuietRank() override { delete inner_; }
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", dtr::distributed::get_rank(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
    }
  }

 private:
  testing::TestEventListener* inner_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  dtr::distributed::init_process_group("mpi");
  if (dtr::distributed::get_rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    listeners.Append(new QuietRank(listeners.Release(listeners.default_result_printer())));
  }
  const int rc = RUN_ALL_TESTS();
  if (dtr::distributed::is_initialized()) dtr::distributed::destroy_process_group();
  return rc;
}
