// DTR_TRACE: the Chrome trace file is written as events happen, holds an
// OutOfMemoryError as an event even when nothing catches it, pairs
// evictions with rematerializations by storage id, and shows user scopes.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

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
    size_t used = 0;
    const double d = std::stod(s_.substr(i_), &used);
    if (used == 0) fail("bad value");
    i_ += used;
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

}  // namespace
}  // namespace dtr
