// The file behind DTR_TRACE: Chrome trace events written as they happen.
//
// Format: the JSON Array Format of Chrome's Trace Event Format (viewable in
// Perfetto or chrome://tracing), one whole line per event:
//
//   [
//   {"name":"randn",...}
//   ,{"name":"matmul",...}
//   ]
//
// Each event line after the first begins with its separating comma, so
// whatever part of the file has been written is one JSON array once the line
// "]" is appended. The file only ever grows by whole lines: events wait in a
// fixed 256 KiB buffer that holds whole lines only (a longer event is
// written alone) and go to the file with write(2) at least once a second, on
// every error event and on close; the memory used does not grow with the
// length of the run.
//
// The closing "]" is written when the file is closed (set_trace_path, the
// runtime's destructor, exit, std::terminate after an uncaught exception,
// the Python module at interpreter exit) and on SIGINT and SIGTERM, by an
// async-signal-safe handler that then lets the signal end the process
// (Note [trace on signals] in docs/DESIGN.md: what the handler may touch,
// how it and the writers stay out of each other's way, and when it chains
// to a handler installed before it instead). A process killed by SIGKILL,
// or ended by _exit, leaves the lines written so far without the "]":
// trace::close_cut_file (remat/trace.h) closes such a file; by hand,
// `echo ']' >> trace.json` does, provided the file ends with a line break.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace dtr::remat {

/// What a trace file shares with the signal handler (Note [trace on
/// signals]): atomics only, in a fixed table that is never freed.
struct TraceSignalSlot;

class TraceFile {
 public:
  /// Opens (truncates) `path` and writes the opening "[" line. Throws
  /// ValueError naming the path when it cannot be opened for writing.
  explicit TraceFile(const std::string& path);
  /// Writes the buffered events and the closing "]", and closes the file.
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  const std::string& path() const { return path_; }
  /// Appends one event: a JSON object without separators, on one line (a
  /// line break in it is written as a space). Dropped once the file is
  /// closed or a write to it failed (a warning names the path and the error).
  void write(std::string_view event);
  /// Pushes the buffered events to the file.
  void flush();

 private:
  friend void close_open_trace_files(std::string_view reason, bool wait);
  void close_locked(std::string_view reason);
  /// Writes the buffer's lines, then `tail` (whole lines), with the close
  /// signals blocked. False, writing nothing, when the file is closed or a
  /// signal handler has claimed it.
  bool write_out_locked(std::string_view tail);
  /// write(2) of all of `bytes`; false (and a warning, once) on an error.
  bool write_all(std::string_view bytes);

  std::string path_;
  std::mutex mutex_;
  int fd_ = -1;
  std::unique_ptr<char[]> buffer_;  // whole lines in [0, used_)
  size_t used_ = 0;
  TraceSignalSlot* slot_ = nullptr;  // null: no slot was free; signals then leave the file open
  bool first_ = true;
  bool failed_ = false;
  std::chrono::steady_clock::time_point last_flush_;
};

/// Closes every open trace file: writes its buffered events, an instant
/// event "terminate" carrying `reason` when it is not empty, and the
/// closing "]"; later events to it are dropped. With `wait` false (the
/// std::terminate hook), a file another thread is writing at that moment
/// is left as it is; with `wait` true its writer is waited for.
void close_open_trace_files(std::string_view reason, bool wait);

/// `s` as the body of a JSON string (quotes, backslashes and control
/// characters escaped).
std::string json_escape(std::string_view s);

/// A small number for the calling thread (the events' "tid").
int trace_thread_id();

/// Microseconds since the library was loaded (the events' "ts").
double trace_now_us();
double trace_us(std::chrono::steady_clock::time_point t);

}  // namespace dtr::remat
