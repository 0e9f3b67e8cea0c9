// Library handles per thread and device (Note [library handles per
// thread]). Plain host code over any handle type, so it is tested without a
// GPU (tests/cuda/handle_pool_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtr::cuda {

// Note [library handles per thread]: a cuBLAS or cuDNN handle must not be
// used by two threads at once (cuDNN's documentation: "a cuDNN handle ...
// must not be used concurrently"; cuBLAS's: a handle per thread). Each thread
// gets its own handle per device, made on its first call there; when the
// thread ends its handles go back to the pool, and the next new thread takes
// one of them instead of making another (the way c10's
// DeviceThreadHandlePool reuses handles). Handles are never destroyed: they
// live until the process exits, as the libraries' contexts do.
template <typename Handle>
class ThreadHandlePool {
 public:
  /// `create(device)` makes a handle for `device` (with the device current);
  /// it may throw, and then nothing is kept.
  explicit ThreadHandlePool(std::function<Handle(int device)> create)
      : shared_(std::make_shared<Shared>(std::move(create))) {}
  ThreadHandlePool(const ThreadHandlePool&) = delete;
  ThreadHandlePool& operator=(const ThreadHandlePool&) = delete;

  /// The calling thread's handle for `device`: the same on every call of
  /// this thread, never the handle of another live thread.
  Handle get(int device) {
    Window& w = window();
    if (auto it = w.handles.find(device); it != w.handles.end()) return it->second;
    Handle h = shared_->take(device);
    w.handles.emplace(device, h);
    return h;
  }
  /// Handles made so far (all devices).
  int64_t created() const {
    std::lock_guard lock(shared_->mu);
    return shared_->created;
  }
  /// Handles of `device` free for a new thread (given back by ended threads).
  int64_t free_count(int device) const {
    std::lock_guard lock(shared_->mu);
    auto it = shared_->free.find(device);
    return it == shared_->free.end() ? 0 : int64_t(it->second.size());
  }

 private:
  struct Shared {
    explicit Shared(std::function<Handle(int)> c) : create(std::move(c)) {}
    std::mutex mu;
    std::function<Handle(int)> create;
    std::map<int, std::vector<Handle>> free;
    int64_t created = 0;

    Handle take(int device) {
      {
        std::lock_guard lock(mu);
        auto& f = free[device];
        if (!f.empty()) {
          Handle h = f.back();
          f.pop_back();
          return h;
        }
      }
      Handle h = create(device);  // outside the lock: it may be slow, or throw
      std::lock_guard lock(mu);
      ++created;
      return h;
    }
    void give_back(int device, Handle h) {
      std::lock_guard lock(mu);
      free[device].push_back(h);
    }
  };
  // One thread's handles of one pool; gives them back when the thread ends.
  // It keeps the pool's shared state alive, so a pool destroyed before the
  // thread ends leaves no dangling window.
  struct Window {
    std::shared_ptr<Shared> shared;
    std::unordered_map<int, Handle> handles;
    Window() = default;
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;
    ~Window() {
      if (shared)
        for (const auto& [device, h] : handles) shared->give_back(device, h);
    }
  };
  Window& window() {
    thread_local std::unordered_map<const Shared*, Window> windows;
    auto [it, inserted] = windows.try_emplace(shared_.get());
    if (inserted) it->second.shared = shared_;
    return it->second;
  }

  std::shared_ptr<Shared> shared_;
};

}  // namespace dtr::cuda
