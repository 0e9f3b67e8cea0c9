// The engine, OpenMP pinning and per-thread scratch of the oneDNN paths
// (cpu/onednn_support.h).
#include "cpu/onednn_support.h"

#if DTR_HAVE_ONEDNN

#include <dlfcn.h>

#include <cstdlib>
#include <new>

namespace dtr::cpu::onednn {

const OmpControl& omp_control() {
  static const OmpControl control = [] {
    OmpControl c;
    const dnnl_version_t* v = dnnl_version();
    if (v->cpu_runtime == DNNL_RUNTIME_SEQ) {
      c.usable = true;
      return c;
    }
    if (v->cpu_runtime != DNNL_RUNTIME_OMP) return c;  // TBB, threadpool: not pinned here
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&dnnl_version), &info) == 0 || info.dli_fname == nullptr)
      return c;
    void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (lib == nullptr) return c;
    // The handle's scope is libdnnl and its dependencies, its OpenMP runtime among them.
    c.set = reinterpret_cast<void (*)(int)>(dlsym(lib, "omp_set_num_threads"));
    c.get = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_max_threads"));
    dlclose(lib);  // libdtr links libdnnl: it stays loaded
    c.usable = c.set != nullptr && c.get != nullptr;
    return c;
  }();
  return control;
}

OneOmpThread::OneOmpThread() {
  const OmpControl& c = omp_control();
  if (c.set != nullptr) {
    saved_ = c.get();
    if (saved_ != 1) c.set(1);
  }
}

OneOmpThread::~OneOmpThread() {
  if (saved_ > 1) omp_control().set(saved_);
}

dnnl::engine& cpu_engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

Buffer::~Buffer() { std::free(p_); }

void* Buffer::get(size_t bytes) {
  if (bytes > n_) {
    std::free(p_);
    n_ = (bytes + 4095) / 4096 * 4096;
    p_ = std::aligned_alloc(64, n_);
    if (p_ == nullptr) {
      n_ = 0;
      throw std::bad_alloc();
    }
  }
  return p_;
}

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch s;
  return s;
}

}  // namespace dtr::cpu::onednn

#endif  // DTR_HAVE_ONEDNN
