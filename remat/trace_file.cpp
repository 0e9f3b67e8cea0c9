#include "remat/trace_file.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace dtr::remat {

namespace {

const std::chrono::steady_clock::time_point g_epoch = std::chrono::steady_clock::now();

constexpr size_t kBufferBytes = size_t{256} << 10;
constexpr auto kFlushInterval = std::chrono::seconds(1);

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
  close_open_trace_files(reason);
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

TraceFile::TraceFile(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    throw ValueError(fmt::format("DTR_TRACE: cannot open '{}' for writing: {}", path,
                                 std::strerror(errno)));
  }
  std::setvbuf(file_, nullptr, _IOFBF, kBufferBytes);
  std::fputs("[\n", file_);
  std::fflush(file_);
  last_flush_ = std::chrono::steady_clock::now();
  std::lock_guard lock(open_files_mutex());
  static const bool hooked = [] {
    g_previous_terminate = std::set_terminate(on_terminate);
    return true;
  }();
  (void)hooked;
  open_files().push_back(this);
}

TraceFile::~TraceFile() {
  {
    std::lock_guard lock(open_files_mutex());
    auto& v = open_files();
    std::erase(v, this);
  }
  std::lock_guard lock(mutex_);
  close_locked("");
}

void TraceFile::write(std::string_view event) {
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fwrite(event.data(), 1, event.size(), file_);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_flush_ >= kFlushInterval) {
    std::fflush(file_);
    last_flush_ = now;
  }
}

void TraceFile::flush() {
  std::lock_guard lock(mutex_);
  if (file_ != nullptr) std::fflush(file_);
  last_flush_ = std::chrono::steady_clock::now();
}

void TraceFile::close_locked(std::string_view reason) {
  if (file_ == nullptr) return;
  if (!reason.empty()) {
    if (!first_) std::fputs(",\n", file_);
    first_ = false;
    const std::string event = fmt::format(
        R"({{"name":"terminate","cat":"error","ph":"i","s":"g","ts":{:.3f},"pid":1,"tid":{},"args":{{"reason":"{}"}}}})",
        trace_now_us(), trace_thread_id(), json_escape(reason));
    std::fputs(event.c_str(), file_);
  }
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

void close_open_trace_files(std::string_view reason) {
  std::unique_lock files_lock(open_files_mutex(), std::try_to_lock);
  if (!files_lock.owns_lock()) return;
  for (TraceFile* f : open_files()) {
    std::unique_lock lock(f->mutex_, std::try_to_lock);
    if (lock.owns_lock()) f->close_locked(reason);
  }
}

}  // namespace dtr::remat
