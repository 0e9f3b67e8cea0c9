// DTR_TRACE: the Chrome trace file is written as events happen, holds an
// OutOfMemoryError as an event even when nothing catches it, pairs
// evictions with rematerializations by storage id, and shows user scopes.
// It holds whole lines only, so a file cut anywhere can be closed, and
// SIGTERM or SIGINT leave it closed (Note [trace on signals]).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "child_process.h"
#include "dtr/dtr.h"

namespace dtr {
namespace {

namespace fs = std::filesystem;

// ---- a JSON reader, just enough for trace files -----------------------------

struct Json;
using JsonArray = std::vector<Json>;
using JsonObject = std::map<std::string, Json>;
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> v;
  bool has(const std::string& k) const {
    const auto* o = std::get_if<JsonObject>(&v);
    return o != nullptr && o->count(k) > 0;
  }
  const Json& operator[](const std::string& k) const { return std::get<JsonObject>(v).at(k); }
  const std::string& str() const { return std::get<std::string>(v); }
  double num() const { return std::get<double>(v); }
  const JsonArray& arr() const { return std::get<JsonArray>(v); }
};

class JsonReader {
 public:
  explicit JsonReader(std::string text) : s_(std::move(text)) {}
  // Throws std::runtime_error on anything but one JSON value.
  Json document() {
    Json j = value();
    skip();
    if (i_ != s_.size()) fail("trailing text");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + " at offset " + std::to_string(i_));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u':
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          out += char(std::stoi(s_.substr(i_, 4), nullptr, 16));  // ASCII is enough here
          i_ += 4;
          break;
        default: fail("bad escape");
      }
    }
  }
  Json value() {
    skip();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      JsonObject o;
      if (eat('}')) return Json{o};
      do {
        skip();
        std::string k = string();
        expect(':');
        o[k] = value();
      } while (eat(','));
      expect('}');
      return Json{o};
    }
    if (c == '[') {
      ++i_;
      JsonArray a;
      if (eat(']')) return Json{a};
      do a.push_back(value());
      while (eat(','));
      expect(']');
      return Json{a};
    }
    if (c == '"') return Json{string()};
    if (s_.compare(i_, 4, "true") == 0) return i_ += 4, Json{true};
    if (s_.compare(i_, 5, "false") == 0) return i_ += 5, Json{false};
    if (s_.compare(i_, 4, "null") == 0) return i_ += 4, Json{nullptr};
    const char* begin = s_.c_str() + i_;
    char* end = nullptr;
    const double d = std::strtod(begin, &end);  // no copy of the rest: traces run to megabytes
    if (end == begin) fail("bad value");
    i_ += size_t(end - begin);
    return Json{d};
  }

  std::string s_;
  size_t i_ = 0;
};

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The events of a trace file. `closed`: the file must end with its "]";
// otherwise (a trace still being written) the "]" is supplied, as the
// array format allows.
JsonArray read_events(const fs::path& p, bool closed = true) {
  std::string text = read_text(p);
  if (!closed) text += "]";
  return JsonReader(text).document().arr();
}

std::vector<const Json*> named(const JsonArray& events, const std::string& name) {
  std::vector<const Json*> out;
  for (const Json& e : events)
    if (e["name"].str() == name) out.push_back(&e);
  return out;
}

fs::path temp_trace(const std::string& name) {
  return fs::temp_directory_path() / ("dtr_trace_test_" + std::to_string(::getpid()) + "_" + name);
}

// Traces the global runtime into a file for the test's lifetime.
struct TraceScope {
  explicit TraceScope(const fs::path& p) : path(p) {
    remat::Runtime::global().set_trace_path(path.string());
  }
  ~TraceScope() {
    remat::Runtime::global().set_trace_path("");
    remat::set_memory_budget(std::nullopt);
    std::error_code ec;
    fs::remove(path, ec);
  }
  fs::path path;
};

constexpr int64_t kMiB = int64_t{1} << 20;

// More unevictable bytes than the budget: constants from outside.
void run_out_of_memory(std::vector<Tensor>& held) {
  remat::set_memory_budget(2 * kMiB);
  for (int i = 0; i < 4; ++i) held.push_back(from_vector(std::vector<float>(size_t(kMiB / 4), 1.0f)));
}

TEST(Trace, OutOfMemoryIsAnEventOnDiskOnceCaught) {
  TraceScope trace(temp_trace("oom.json"));
  std::vector<Tensor> held;
  std::string report;
  try {
    dtr::trace::Scope s("step 3");
    run_out_of_memory(held);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    report = e.what();
  }
  held.clear();
  // Read while the trace is still open, nothing flushed by hand: the error
  // is already in the file, inside the scope it unwound.
  const JsonArray open_events = read_events(trace.path, /*closed=*/false);
  const auto oom = named(open_events, "OutOfMemoryError");
  ASSERT_EQ(oom.size(), 1u);
  EXPECT_EQ((*oom[0])["ph"].str(), "i");
  EXPECT_EQ((*oom[0])["args"]["message"].str(), report);
  EXPECT_EQ((*oom[0])["args"]["budget_bytes"].num(), double(2 * kMiB));
  const auto begin = named(open_events, "step 3");
  ASSERT_EQ(begin.size(), 1u);
  EXPECT_EQ((*begin[0])["ph"].str(), "B");
  EXPECT_LE((*begin[0])["ts"].num(), (*oom[0])["ts"].num());
  // Closing writes the rest and the "]": the file is one JSON array as it
  // is, the scope ended (during the unwinding) after the error.
  remat::Runtime::global().set_trace_path("");
  const JsonArray events = read_events(trace.path);
  EXPECT_EQ(named(events, "OutOfMemoryError").size(), 1u);
  const auto step = named(events, "step 3");
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ((*step[1])["ph"].str(), "E");
  EXPECT_EQ((*step[0])["tid"].num(), (*step[1])["tid"].num());
  EXPECT_LE((*oom[0])["ts"].num(), (*step[1])["ts"].num());
}

TEST(Trace, OpsAreDurationEventsWithShapesBytesAndStorages) {
  TraceScope trace(temp_trace("ops.json"));
  Tensor a = randn({2, 3});
  Tensor b = randn({3, 4});
  Tensor c = matmul(a, b);
  remat::Runtime::global().set_trace_path("");
  const JsonArray events = read_events(trace.path);
  const auto mm = named(events, "matmul");
  ASSERT_EQ(mm.size(), 1u);
  const Json& e = *mm[0];
  EXPECT_EQ(e["cat"].str(), "op");
  EXPECT_EQ(e["ph"].str(), "X");
  EXPECT_GE(e["dur"].num(), 0.0);
  EXPECT_EQ(e["args"]["inputs"].str(), "[2, 3] float32, [3, 4] float32");
  EXPECT_EQ(e["args"]["outputs"].str(), "[2, 4] float32");
  EXPECT_EQ(e["args"]["output_bytes"].num(), 2 * 4 * 4);
  // matmul's inputs are the storages the two randn ops wrote, by id.
  const auto made = named(events, "randn");
  ASSERT_EQ(made.size(), 2u);
  const JsonArray& in = e["args"]["input_storages"].arr();
  ASSERT_EQ(in.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ((*made[i])["args"]["output_storages"].arr().size(), 1u);
    EXPECT_EQ(in[i].num(), (*made[i])["args"]["output_storages"].arr()[0].num());
    EXPECT_GT(in[i].num(), 0);
  }
  EXPECT_NE(in[0].num(), in[1].num());
  ASSERT_EQ(e["args"]["output_storages"].arr().size(), 1u);
  // A memory counter follows each op.
  EXPECT_FALSE(named(events, "memory").empty());
}

TEST(Trace, EvictionsAndRematerializationsShareStorageIds) {
  TraceScope trace(temp_trace("remat.json"));
  remat::set_memory_budget(4 * kMiB);
  const int64_t n = kMiB / 4;  // 1 MiB of float32
  std::vector<Tensor> chain{randn({n})};
  for (int i = 0; i < 8; ++i) chain.push_back(chain.back() * 0.5);  // 9 MiB against 4: evictions
  for (const Tensor& t : chain) EXPECT_TRUE(std::isfinite(t.sum().item<float>()));  // brings evicted ones back
  remat::Runtime::global().set_trace_path("");
  const JsonArray events = read_events(trace.path);

  std::map<double, double> evicted_at;  // storage id -> time of its first eviction
  for (const Json* e : named(events, "evict")) {
    const double id = (*e)["args"]["storage"].num();
    EXPECT_GT(id, 0);
    evicted_at.try_emplace(id, (*e)["ts"].num());
  }
  ASSERT_FALSE(evicted_at.empty());
  std::map<double, std::string> produced_by;  // storage id -> op
  int rematerialized = 0;
  for (const Json& e : events) {
    const std::string& name = e["name"].str();
    if (e.has("cat") && e["cat"].str() == "op") {
      for (const Json& id : e["args"]["output_storages"].arr()) produced_by[id.num()] = name;
    }
    if (name.rfind("rematerialize ", 0) != 0) continue;
    EXPECT_EQ(e["ph"].str(), "X");
    for (const Json& id : e["args"]["storages"].arr()) {
      ++rematerialized;
      // Every storage brought back was evicted before, under the same id,
      // and was first made by the op the event names.
      ASSERT_TRUE(evicted_at.count(id.num())) << "rematerialized storage " << id.num() << " never evicted";
      EXPECT_LT(evicted_at[id.num()], e["ts"].num());
      EXPECT_EQ("rematerialize " + produced_by[id.num()], name);
    }
  }
  EXPECT_GT(rematerialized, 0);
}

TEST(Trace, BadPathIsAValueErrorNamingIt) {
  const std::string bad = "/nonexistent-dtr-dir/trace.json";
  try {
    remat::Runtime::global().set_trace_path(bad);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_FALSE(remat::Runtime::global().tracing());
  EXPECT_EQ(ones({2}).sum().item<float>(), 2.0f);  // and ops go on untraced
}

// DTR_TRACE naming a path that cannot be written: the first op throws the
// ValueError (start-up itself does not fail half-way), the next ones run.
// Checked in a child process, whose runtime starts with that variable.
TEST(Trace, BadDtrTracePathFailsTheFirstOpOnly) {
  if (std::getenv("DTR_TRACE_TEST_CHILD") != nullptr) {
    try {
      (void)ones({2});
      std::exit(3);  // no error at all
    } catch (const ValueError& e) {
      if (std::string(e.what()).find("/nonexistent-dtr-dir/t.json") == std::string::npos) std::exit(4);
    }
    std::exit(ones({2}).sum().item<float>() == 2.0f ? 0 : 5);
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  ASSERT_FALSE(ec);
  const std::string cmd = "DTR_TRACE=/nonexistent-dtr-dir/t.json DTR_TRACE_TEST_CHILD=1 '" +
                          self.string() + "' --gtest_filter=Trace.BadDtrTracePathFailsTheFirstOpOnly > /dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "3: no error, 4: error without the path, 5: later ops fail";
}

// An OutOfMemoryError nobody catches ends the process through
// std::terminate: the trace holds the error and is closed, a valid array.
TEST(Trace, UncaughtOutOfMemoryLeavesAClosedTrace) {
  // The child runs the test again from the start (threadsafe style: no fork
  // of a process whose kernel threads are running); the path is the parent's.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (std::getenv("DTR_TRACE_TEST_PARENT") == nullptr)
    ::setenv("DTR_TRACE_TEST_PARENT", std::to_string(::getpid()).c_str(), 1);
  const fs::path path = fs::temp_directory_path() /
                        ("dtr_trace_test_uncaught_" + std::string(std::getenv("DTR_TRACE_TEST_PARENT")) + ".json");
  EXPECT_DEATH(
      {
        remat::Runtime::global().set_trace_path(path.string());
        std::vector<Tensor> held;
        [&]() noexcept { run_out_of_memory(held); }();
      },
      "OutOfMemoryError|out of memory");
  const JsonArray events = read_events(path);
  EXPECT_EQ(named(events, "OutOfMemoryError").size(), 1u);
  const auto end = named(events, "terminate");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_NE((*end[0])["args"]["reason"].str().find("out of memory"), std::string::npos);
  std::error_code ec;
  fs::remove(path, ec);
}

// ---- whole lines: cut files and signals (Note [trace on signals]) -----------

// A complete trace, cut at every byte offset, is closed by close_cut_file
// into one JSON array holding exactly the events of its whole lines; the
// complete file itself is left as it is.
TEST(Trace, AFileCutAtAnyByteIsClosedByCloseCutFile) {
  TraceScope trace(temp_trace("whole.json"));
  {
    dtr::trace::Scope s("step \"1\"\nof 2");  // a quote and a line break in a name stay on one line
    Tensor a = randn({4, 4});
    EXPECT_TRUE(std::isfinite(matmul(a, a).relu().sum().item<float>()));
  }
  remat::Runtime::global().set_trace_path("");
  const std::string full = read_text(trace.path);
  const size_t event_count = JsonReader(full).document().arr().size();
  ASSERT_GT(event_count, 4u);
  // "[", one line per event (each after the first led by its comma), "]".
  ASSERT_EQ(size_t(std::count(full.begin(), full.end(), '\n')), event_count + 2) << full;
  EXPECT_FALSE(dtr::trace::close_cut_file(trace.path.string()));
  EXPECT_EQ(read_text(trace.path), full);

  const fs::path cut = temp_trace("cut.json");
  for (size_t n = 0; n <= full.size(); ++n) {
    {
      std::ofstream out(cut, std::ios::binary | std::ios::trunc);
      out.write(full.data(), std::streamsize(n));
    }
    EXPECT_EQ(dtr::trace::close_cut_file(cut.string()), n != full.size()) << "cut at " << n;
    const std::string closed = read_text(cut);
    const size_t lines = size_t(std::count(full.begin(), full.begin() + std::ptrdiff_t(n), '\n'));
    const size_t whole_events = std::min(lines > 0 ? lines - 1 : 0, event_count);
    try {
      EXPECT_EQ(JsonReader(closed).document().arr().size(), whole_events) << "cut at " << n;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cut at " << n << ": " << e.what() << " in:\n" << closed;
      break;
    }
  }
  std::error_code ec;
  fs::remove(cut, ec);
}

TEST(Trace, CloseCutFileLeavesAFileThatIsNoTraceAsItIs) {
  const fs::path p = temp_trace("not_a_trace.json");
  {
    std::ofstream out(p);
    out << "{\"traceEvents\": [\n";
  }
  try {
    dtr::trace::close_cut_file(p.string());
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(p), "{\"traceEvents\": [\n");
  fs::remove(p);
  EXPECT_THROW(dtr::trace::close_cut_file(p.string()), ValueError);  // no such file
}

// SIGTERM or SIGINT (Ctrl-C) while the trace is being written: the process
// still dies of the signal, and the file it leaves is one JSON array as it
// is, holding the events it had buffered. The child is this test again,
// traced from its environment, running ops until the signal comes.
TEST(Trace, ASignalLeavesAClosedTrace) {
  if (std::getenv("DTR_TRACE_SIGNAL_CHILD") != nullptr) {
    for (int step = 0;; ++step) {
      dtr::trace::Scope s("step " + std::to_string(step));
      Tensor a = randn({16, 16});
      (void)matmul(a, a).sum().item<float>();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  ASSERT_FALSE(ec);
  for (const int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(strsignal(sig));
    testing::TempDir dir;
    const fs::path path = dir.path / "trace.json";
    const pid_t pid = testing::spawn_child(self, {"--gtest_filter=Trace.ASignalLeavesAClosedTrace"},
                                           {{"DTR_TRACE", path.string()}, {"DTR_TRACE_SIGNAL_CHILD", "1"}},
                                           dir.path / "out", dir.path / "err");
    ASSERT_GT(pid, 0);
    // Signalled once events are on disk (flushed within a second), while
    // it goes on writing.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = read_text(path);
      if (std::count(text.begin(), text.end(), '\n') >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_EQ(::kill(pid, sig), 0);
    EXPECT_EQ(testing::wait_child(pid), 128 + sig) << testing::read_all(dir.path / "err");
    const std::string text = read_text(path);
    EXPECT_TRUE(text.ends_with("\n]\n")) << text.substr(text.size() - std::min<size_t>(text.size(), 300));
    try {
      const JsonArray events = JsonReader(text).document().arr();
      EXPECT_FALSE(named(events, "matmul").empty());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not one JSON array: " << e.what() << "; the file ends with:\n"
                    << text.substr(text.size() - std::min<size_t>(text.size(), 300));
    }
  }
}

}  // namespace
}  // namespace dtr
