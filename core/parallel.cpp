// The thread pool behind parallel_for (core/parallel.h).
//
// One job runs at a time. The caller publishes it (a new generation number)
// and takes chunks itself; each helper that wakes while the job is open joins
// it and claims chunks from a shared counter until none are left. Once the
// caller has run out of chunks it closes the job and waits only for the
// helpers that joined, so a helper slow to wake never holds it up. Chunks are claimed
// dynamically, but a chunk's bounds and work never depend on which thread
// runs it, so results do not either (Note [determinism]).
//
// Waiting: a thread that has nothing to do spins for a short, bounded time
// (kIdleSpin, kJoinSpin), then sleeps on a condition variable, so an idle
// pool does not compete with other threads or processes for the cores.
#include "core/parallel.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif

namespace dtr {
namespace {

std::atomic<int> g_threads{0};
thread_local bool t_in_parallel = false;

// How long an idle worker polls for the next job before it sleeps (ops
// come a few microseconds apart in a training step), and how long the
// caller polls for joined helpers finishing their last chunk. Measured on a
// shared two-core machine: longer idle polls only cost CPU (+5% per step at
// 20 us, +10% at 50 us, against sleeping at once).
constexpr auto kIdleSpin = std::chrono::microseconds(10);
constexpr auto kJoinSpin = std::chrono::microseconds(20);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

/// Polls `done()` for at most `limit`; true when it became true.
template <typename Pred>
bool spin_until(std::chrono::microseconds limit, Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

int default_threads() {
  if (const char* s = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    // "4" or the first entry of a nested list such as "4,2".
    if (end != s && (*end == '\0' || *end == ',') && v > 0 && v <= 4096) return int(v);
  }
#if defined(__linux__)
  // The CPUs this process may run on (a container's or taskset's share).
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : int(hc);
}

/// One parallel loop: chunks [0, nchunks) of fn(ctx, c).
struct Job {
  void (*fn)(void*, int64_t) = nullptr;
  void* ctx = nullptr;
  int64_t nchunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  int64_t error_chunk = std::numeric_limits<int64_t>::max();

  /// Claims and runs chunks until none are left. A chunk that throws stops
  /// further claims; chunks already claimed still run, so every chunk below
  /// the first failing one runs and the lowest failure is the one kept.
  void work() {
    const bool was_in_parallel = t_in_parallel;
    t_in_parallel = true;
    while (!failed.load(std::memory_order_relaxed)) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= nchunks) break;
      try {
        fn(ctx, c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (c < error_chunk) {
          error_chunk = c;
          error = std::current_exception();
        }
        failed.store(true, std::memory_order_relaxed);
      }
    }
    t_in_parallel = was_in_parallel;
  }
};

class ThreadPool {
 public:
  /// Runs `job` on the calling thread and up to threads - 1 workers; false
  /// (nothing run) when another thread's job holds the pool.
  bool try_run(Job& job, int threads) {
    std::unique_lock<std::mutex> run_lock(run_mutex_, std::try_to_lock);
    if (!run_lock.owns_lock()) return false;
    if (int(workers_.size()) != threads - 1) resize(threads - 1);
    const int helpers = int(std::min<int64_t>(job.nchunks, threads) - 1);
    if (helpers > 0) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &job;
        helpers_ = helpers;
        generation_.fetch_add(1, std::memory_order_release);
      }
      wake_.notify_all();
    }
    job.work();
    if (helpers > 0) {
      // Close the job: a helper that has not joined yet (still waking up, or
      // its core busy elsewhere) never will, and there is nothing left for
      // it. Only the helpers that joined are waited for; they are finishing
      // their last chunk.
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = nullptr;
      }
      if (!spin_until(kJoinSpin, [&] { return active_.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return active_.load(std::memory_order_acquire) == 0; });
      }
    }
    return true;
  }

 private:
  // Called with run_mutex_ held, so no job is in flight.
  void resize(int workers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = false;
    const uint64_t generation = generation_.load(std::memory_order_relaxed);
    for (int i = 0; i < workers; ++i)
      workers_.emplace_back([this, i, generation] { worker_loop(i, generation); });
  }

  void worker_loop(int index, uint64_t seen) {
    for (;;) {
      spin_until(kIdleSpin, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
        if (stop_) return;
        seen = generation_.load(std::memory_order_relaxed);
        // Join the job if it is still open. Workers beyond the job's helper
        // count, and any that come after the caller closed it, never touch
        // the job (it lives on the caller's stack).
        if (index < helpers_ && job_ != nullptr) {
          job = job_;
          active_.fetch_add(1, std::memory_order_relaxed);
        }
      }
      if (job == nullptr) continue;
      job->work();
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::mutex run_mutex_;  // held by the thread whose job owns the pool
  std::mutex mutex_;      // guards job_, helpers_, stop_ and waits
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};  // helpers that joined the current job
  Job* job_ = nullptr;          // the open job, or null once closed
  int helpers_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

ThreadPool& pool() {
  // Never destroyed: workers may still be asleep when static destructors run.
  static ThreadPool* p = new ThreadPool;
  return *p;
}

}  // namespace

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    int expected = 0;
    if (!g_threads.compare_exchange_strong(expected, n, std::memory_order_relaxed)) n = expected;
  }
  return n;
}

void set_num_threads(int n) { g_threads.store(n < 1 ? 1 : n, std::memory_order_relaxed); }

bool in_parallel_region() { return t_in_parallel; }

namespace detail {

void run_chunks(int64_t nchunks, void (*fn)(void*, int64_t), void* ctx) {
  if (nchunks <= 0) return;
  const int threads = num_threads();
  if (nchunks == 1 || threads == 1 || t_in_parallel) {
    for (int64_t c = 0; c < nchunks; ++c) fn(ctx, c);
    return;
  }
  Job job;
  job.fn = fn;
  job.ctx = ctx;
  job.nchunks = nchunks;
  if (!pool().try_run(job, threads)) {
    // The pool serves another thread's loop: same chunks, this thread only.
    job.work();
  }
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace detail

}  // namespace dtr
