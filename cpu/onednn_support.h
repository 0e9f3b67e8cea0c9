// What the oneDNN paths (cpu/onednn_conv.cpp, cpu/onednn_gemm.cpp) share:
// the engine, the pinning of oneDNN's OpenMP team to one thread, and
// per-thread scratch. Internal to the CPU backend and compiled only with
// oneDNN (DTR_HAVE_ONEDNN).
#pragma once

#if DTR_HAVE_ONEDNN

#include <cstddef>

#include <oneapi/dnnl/dnnl.hpp>

namespace dtr::cpu::onednn {

// oneDNN built with the OpenMP runtime (Debian's) runs a primitive on
// omp_get_max_threads() threads, a per-thread setting read both when the
// primitive is made and when it runs. Every oneDNN call in dtr is made
// under OneOmpThread, so every primitive is made for and run on one thread:
// its arithmetic order is a function of the shapes alone (Note
// [determinism]), and no OpenMP team ever competes with dtr's pool. The
// OpenMP entry points are those of the runtime libdnnl itself loads (looked
// up through its handle), so a program linking another OpenMP runtime does
// not confuse them.
struct OmpControl {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
  bool usable = false;  // the runtime is sequential, or OpenMP with both entry points
};
const OmpControl& omp_control();

/// One OpenMP thread on this thread for the guard's lifetime; the caller's
/// setting comes back after (it may be a program's own OpenMP thread).
class OneOmpThread {
 public:
  OneOmpThread();
  ~OneOmpThread();
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int saved_ = 0;
};

/// The process's CPU engine; never destroyed (pool threads may still hold
/// streams when static destructors run).
dnnl::engine& cpu_engine();

/// A 64-byte-aligned buffer grown on demand and kept (outside the tensor
/// budget, like the im2col path's columns: Note [hard budget]). Throws
/// std::bad_alloc when the memory cannot be had.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  void* get(size_t bytes);

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

/// Per-thread buffers and stream: the convolutions' reordered chunks and
/// scratchpad, and GEMM's own scratchpad (a GEMM may run between a
/// convolution's uses of `pad`, so it never shares it).
struct ThreadScratch {
  Buffer in, in2, out, pad, gemm_pad;
  dnnl::stream stream{cpu_engine()};
};
ThreadScratch& thread_scratch();

}  // namespace dtr::cpu::onednn

#endif  // DTR_HAVE_ONEDNN
