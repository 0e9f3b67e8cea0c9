#include "remat/trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "core/memory_history.h"
#include "remat/runtime.h"
#include "remat/trace_file.h"

namespace dtr::trace {

Scope::Scope(std::string name) : name_(std::move(name)) {
  remat::Runtime& rt = remat::Runtime::global();
  if (memory::recording()) {
    memory::push_scope(name_);
    in_history_ = true;
  }
  if (rt.tracing()) generation_ = rt.trace_scope_begin(name_);
}

Scope::~Scope() {
  if (in_history_) memory::pop_scope();
  if (generation_ == 0) return;
  try {
    remat::Runtime::global().trace_scope_end(name_, generation_);
  } catch (...) {
    // A trace event that cannot be formatted (out of host memory) is dropped.
  }
}

void close_files() noexcept {
  try {
    remat::close_open_trace_files("", /*wait=*/true);
  } catch (...) {
    // A lock that cannot be taken (std::system_error): the files stay open.
  }
}

namespace {

/// Closes the descriptor when it goes.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

bool close_cut_file(const std::string& path) {
  const auto fail = [&](std::string_view what) {
    return ValueError(fmt::format("close_cut_file: cannot {} '{}': {}", what, path, std::strerror(errno)));
  };
  const Fd f{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
  if (f.fd < 0) throw fail("open");
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw fail("read");
  const off_t size = st.st_size;
  const auto read_at = [&](off_t at, char* out, size_t n) {
    if (::pread(f.fd, out, n, at) != ssize_t(n)) throw fail("read");
  };
  const auto write_at = [&](off_t at, std::string_view text) {
    if (::pwrite(f.fd, text.data(), text.size(), at) != ssize_t(text.size())) throw fail("write");
  };
  if (size > 0) {
    char first = 0;
    read_at(0, &first, 1);
    if (first != '[') {
      throw ValueError(fmt::format("close_cut_file: '{}' is not a DTR_TRACE file: it does not begin with '['", path));
    }
  }
  // The end of the last whole line: just past the file's last line break.
  off_t whole = 0;
  char chunk[1 << 16];
  for (off_t end = size; end > 0 && whole == 0;) {
    const off_t begin = std::max<off_t>(0, end - off_t(sizeof chunk));
    read_at(begin, chunk, size_t(end - begin));
    for (off_t i = end - begin; i > 0; --i) {
      if (chunk[i - 1] == '\n') {
        whole = begin + i;
        break;
      }
    }
    end = begin;
  }
  if (whole == 0) {  // not even the "[" line: an empty trace
    if (::ftruncate(f.fd, 0) != 0) throw fail("write");
    write_at(0, "[\n]\n");
    return true;
  }
  // Closed already when the last whole line is "]" (the first line is "[",
  // so a "]" line has a line break before it).
  char last[3] = {};
  if (whole >= 3) read_at(whole - 3, last, 3);
  const bool closed = whole >= 3 && std::string_view(last, 3) == "\n]\n";
  if (closed && whole == size) return false;
  if (whole != size && ::ftruncate(f.fd, whole) != 0) throw fail("write");
  if (!closed) write_at(whole, "]\n");
  return true;
}

}  // namespace dtr::trace
