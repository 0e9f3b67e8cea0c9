#include "remat/trace_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"

namespace dtr::remat {

// Note [trace on signals] (docs/DESIGN.md). A file's slot is owned by
// its TraceFile while `in_use`; `fd`, `buffer` and `committed` mirror the
// file and its buffered whole lines; `writers` counts the writes to `fd`
// in progress; `claimed` is set by whoever writes the closing "]" (the
// close path or a signal handler), once per file.
struct TraceSignalSlot {
  std::atomic<bool> in_use{false};
  std::atomic<int> fd{-1};
  std::atomic<const char*> buffer{nullptr};
  std::atomic<size_t> committed{0};
  std::atomic<int> writers{0};
  std::atomic<bool> claimed{true};
};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free &&
                  std::atomic<size_t>::is_always_lock_free && std::atomic<const char*>::is_always_lock_free,
              "the signal handler may only touch lock-free atomics");

namespace {

const std::chrono::steady_clock::time_point g_epoch = std::chrono::steady_clock::now();

constexpr size_t kBufferBytes = size_t{256} << 10;
constexpr auto kFlushInterval = std::chrono::seconds(1);
constexpr std::string_view kClosing = "]\n";

// The open files, for the terminate hook. Never destroyed: a trace may be
// closed from an exit handler after this file's statics are gone.
std::mutex& open_files_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<TraceFile*>& open_files() {
  static auto* v = new std::vector<TraceFile*>;
  return *v;
}

// ---- signals (Note [trace on signals]) -------------------------------------------

// Constant-initialized and never destroyed: a handler may run at any time.
constexpr int kSlots = 16;
TraceSignalSlot g_slots[kSlots];

constexpr std::array<int, 2> kCloseSignals = {SIGINT, SIGTERM};
// The disposition each signal had before ours; read by the handler only
// after sigaction installed it.
struct sigaction g_previous[kCloseSignals.size()];

/// Blocks SIGINT and SIGTERM on the calling thread for the object's
/// lifetime: the handler never runs on a thread that is writing the file.
class BlockCloseSignals {
 public:
  BlockCloseSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (const int sig : kCloseSignals) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockCloseSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockCloseSignals(const BlockCloseSignals&) = delete;
  BlockCloseSignals& operator=(const BlockCloseSignals&) = delete;

 private:
  sigset_t old_;
};

/// write(2) of all `n` bytes at `p`, retrying after EINTR and short
/// writes; false on an error (errno says which). Async-signal-safe.
bool write_fully(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= size_t(r);
  }
  return true;
}

/// Waits until no write to the slot's file is in progress, at most 2 s.
/// Async-signal-safe.
bool wait_for_writers(const TraceSignalSlot& slot) {
  const timespec tick{0, 1000000};  // 1 ms
  for (int i = 0; i < 2000; ++i) {
    if (slot.writers.load() == 0) return true;
    nanosleep(&tick, nullptr);
  }
  return slot.writers.load() == 0;
}

/// The handler's part for every open file: claim it, wait for the write in
/// progress, write the buffered lines and "]".
void close_files_for_signal() {
  for (TraceSignalSlot& slot : g_slots) {
    if (slot.fd.load() < 0) continue;
    const bool mine = !slot.claimed.exchange(true);
    // Another closer's "]" (or a write that began before the claim) must
    // be on disk before this process dies.
    if (!wait_for_writers(slot) || !mine) continue;
    const int fd = slot.fd.load();
    const char* buffer = slot.buffer.load();
    const size_t committed = slot.committed.load(std::memory_order_acquire);
    if (fd < 0) continue;
    slot.writers.fetch_add(1);
    if (buffer == nullptr || write_fully(fd, buffer, committed)) write_fully(fd, kClosing.data(), kClosing.size());
    slot.writers.fetch_sub(1);
  }
}

void on_close_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  size_t i = 0;
  while (i + 1 < kCloseSignals.size() && kCloseSignals[i] != sig) ++i;
  const struct sigaction& previous = g_previous[i];
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else {
    // The default ends the process: close the files, then end it so.
    close_files_for_signal();
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);  // pending until this handler returns, then the default action
  }
  errno = saved_errno;
}

/// Installs the handler for each close signal the process does not ignore;
/// once per process (called under open_files_mutex()).
void install_signal_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (size_t i = 0; i < kCloseSignals.size(); ++i) {
    struct sigaction old {};
    if (sigaction(kCloseSignals[i], nullptr, &old) != 0) continue;
    const bool is_default = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL;
    if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_IGN) continue;
    g_previous[i] = old;
    struct sigaction sa {};
    sa.sa_sigaction = on_close_signal;
    sigemptyset(&sa.sa_mask);
    for (const int sig : kCloseSignals) sigaddset(&sa.sa_mask, sig);
    // A handler chained to keeps its own restart behaviour (Python's wants
    // EINTR); where the signal ended the process, no call sees EINTR.
    sa.sa_flags = SA_SIGINFO | (is_default ? SA_RESTART : old.sa_flags & (SA_RESTART | SA_ONSTACK));
    sigaction(kCloseSignals[i], &sa, nullptr);
  }
}

/// A free slot, taken; null when all are in use.
TraceSignalSlot* take_slot() {
  for (TraceSignalSlot& slot : g_slots) {
    bool expected = false;
    if (slot.in_use.compare_exchange_strong(expected, true)) return &slot;
  }
  return nullptr;
}

// ---- std::terminate ----------------------------------------------------------------

std::terminate_handler g_previous_terminate = nullptr;

// An uncaught exception (an OutOfMemoryError nobody caught) ends the
// process through std::terminate without running exit handlers: close the
// traces first, naming the exception, then carry on as before.
[[noreturn]] void on_terminate() {
  std::string reason = "std::terminate";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      reason = ex.what();
    } catch (...) {
      reason = "an exception of unknown type";
    }
  }
  close_open_trace_files(reason, /*wait=*/false);
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

}  // namespace

double trace_us(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - g_epoch).count();
}
double trace_now_us() { return trace_us(std::chrono::steady_clock::now()); }

int trace_thread_id() {
  static std::atomic<int> next{1};
  thread_local const int id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out;
}

TraceFile::TraceFile(const std::string& path) : path_(path), buffer_(new char[kBufferBytes]) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw ValueError(fmt::format("DTR_TRACE: cannot open '{}' for writing: {}", path, std::strerror(errno)));
  }
  if (!write_fully(fd_, "[\n", 2)) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw ValueError(fmt::format("DTR_TRACE: cannot write to '{}': {}", path, std::strerror(error)));
  }
  last_flush_ = std::chrono::steady_clock::now();
  std::lock_guard lock(open_files_mutex());
  static const bool hooked = [] {
    g_previous_terminate = std::set_terminate(on_terminate);
    // Every file, however opened, gets its "]" at exit: the global runtime
    // that holds it is never destroyed.
    std::atexit([] { close_open_trace_files("", /*wait=*/true); });
    return true;
  }();
  (void)hooked;
  install_signal_handlers();
  slot_ = take_slot();
  if (slot_ != nullptr) {
    slot_->buffer.store(buffer_.get());
    slot_->committed.store(0);
    slot_->fd.store(fd_);
    slot_->claimed.store(false);  // last: the file is the handler's to close from here on
  }
  open_files().push_back(this);
}

TraceFile::~TraceFile() {
  {
    std::lock_guard lock(open_files_mutex());
    std::erase(open_files(), this);
  }
  std::lock_guard lock(mutex_);
  close_locked("");
}

bool TraceFile::write_all(std::string_view bytes) {
  if (failed_) return false;
  if (write_fully(fd_, bytes.data(), bytes.size())) return true;
  failed_ = true;
  logger().warn("DTR_TRACE: writing '{}' failed ({}); no more events go to it (dtr::trace::close_cut_file "
                "makes what it holds a valid file)",
                path_, std::strerror(errno));
  return false;
}

bool TraceFile::write_out_locked(std::string_view tail) {
  if (fd_ < 0 || failed_) return false;
  BlockCloseSignals blocked;
  if (slot_ != nullptr) {
    slot_->writers.fetch_add(1);
    if (slot_->claimed.load()) {  // a signal handler is closing the file: it writes the buffer
      slot_->writers.fetch_sub(1);
      return false;
    }
  }
  const bool ok = write_all({buffer_.get(), used_}) && write_all(tail);
  used_ = 0;
  if (slot_ != nullptr) {
    slot_->committed.store(0);
    slot_->writers.fetch_sub(1);
  }
  return ok;
}

void TraceFile::write(std::string_view event) {
  std::lock_guard lock(mutex_);
  if (fd_ < 0 || failed_) return;
  const size_t line_bytes = (first_ ? 0 : 1) + event.size() + 1;
  if (used_ + line_bytes > kBufferBytes && used_ > 0 && !write_out_locked({})) return;
  if (line_bytes > kBufferBytes) {  // alone, straight to the file
    std::string line = (first_ ? "" : ",") + std::string(event) + "\n";
    std::replace(line.begin(), line.end() - 1, '\n', ' ');
    if (!write_out_locked(line)) return;
  } else {
    char* p = buffer_.get() + used_;
    if (!first_) *p++ = ',';
    std::memcpy(p, event.data(), event.size());
    std::replace(p, p + event.size(), '\n', ' ');
    p[event.size()] = '\n';
    used_ += line_bytes;
    // Whole lines only: the handler may write [0, committed) at any moment.
    if (slot_ != nullptr) slot_->committed.store(used_, std::memory_order_release);
  }
  first_ = false;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_flush_ >= kFlushInterval) {
    write_out_locked({});
    last_flush_ = now;
  }
}

void TraceFile::flush() {
  std::lock_guard lock(mutex_);
  write_out_locked({});
  last_flush_ = std::chrono::steady_clock::now();
}

void TraceFile::close_locked(std::string_view reason) {
  if (fd_ < 0) return;
  std::string tail;
  if (!reason.empty()) {
    tail = fmt::format(
        R"({}{{"name":"terminate","cat":"error","ph":"i","s":"g","ts":{:.3f},"pid":1,"tid":{},"args":{{"reason":"{}"}}}})"
        "\n",
        first_ ? "" : ",", trace_now_us(), trace_thread_id(), json_escape(reason));
  }
  tail += kClosing;
  BlockCloseSignals blocked;
  bool mine = true;
  if (slot_ != nullptr) {
    slot_->writers.fetch_add(1);
    mine = !slot_->claimed.exchange(true);
  }
  if (mine) (void)(write_all({buffer_.get(), used_}) && write_all(tail));
  if (slot_ != nullptr) {
    if (mine) {
      slot_->fd.store(-1);
      slot_->buffer.store(nullptr);
      slot_->committed.store(0);
    }
    slot_->writers.fetch_sub(1);
  }
  if (mine) {
    ::close(fd_);
    if (slot_ != nullptr) slot_->in_use.store(false);
  } else {
    // A signal handler claimed the file and may be writing the buffer
    // now; the process is ending. Both stay as they are.
    (void)buffer_.release();
  }
  fd_ = -1;
  slot_ = nullptr;
  used_ = 0;
}

void close_open_trace_files(std::string_view reason, bool wait) {
  std::unique_lock files_lock(open_files_mutex(), std::defer_lock);
  if (wait) {
    files_lock.lock();
  } else if (!files_lock.try_lock()) {
    return;
  }
  for (TraceFile* f : open_files()) {
    std::unique_lock lock(f->mutex_, std::defer_lock);
    if (wait) {
      lock.lock();
    } else if (!lock.try_lock()) {
      continue;
    }
    f->close_locked(reason);
  }
}

}  // namespace dtr::remat
