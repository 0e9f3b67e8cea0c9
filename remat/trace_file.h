// The file behind DTR_TRACE: Chrome trace events written as they happen.
//
// Format: the JSON Array Format of Chrome's Trace Event Format (one event
// object per line, viewable in Perfetto or chrome://tracing). The closing
// "]" is written when the file is closed (set_trace_path, the runtime's
// destructor, exit, or std::terminate after an uncaught exception); a
// process killed outright leaves the file without it, which that format
// allows. Events go through a fixed-size stdio buffer that is flushed at
// least once a second, on every error event and on close: the memory used
// does not grow with the length of the run.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace dtr::remat {

class TraceFile {
 public:
  /// Opens (truncates) `path` and writes the opening "[". Throws ValueError
  /// naming the path when it cannot be opened for writing.
  explicit TraceFile(const std::string& path);
  /// Writes the closing "]" and closes the file.
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  const std::string& path() const { return path_; }
  /// Appends one event (a JSON object, without separators).
  void write(std::string_view event);
  /// Pushes the buffered events to the file.
  void flush();

 private:
  friend void close_open_trace_files(std::string_view reason);
  void close_locked(std::string_view reason);

  std::string path_;
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  bool first_ = true;
  std::chrono::steady_clock::time_point last_flush_;
};

/// Closes every open trace file (the std::terminate hook), after an instant
/// event "terminate" carrying `reason`; a file another thread is writing
/// at that moment is left as it is.
void close_open_trace_files(std::string_view reason);

/// `s` as the body of a JSON string (quotes, backslashes and control
/// characters escaped).
std::string json_escape(std::string_view s);

/// A small number for the calling thread (the events' "tid").
int trace_thread_id();

/// Microseconds since the library was loaded (the events' "ts").
double trace_now_us();
double trace_us(std::chrono::steady_clock::time_point t);

}  // namespace dtr::remat
