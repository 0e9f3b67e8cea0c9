// core/pickle.h: what PickleWriter writes, Python's pickle.loads reads back
// as the same values, using only the opcodes PyTorch's memory visualizer
// (MemoryViz.js) understands.
#include "core/pickle.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/child_process.h"

namespace dtr {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

// Loads `bytes` in Python and compares repr() with that of `expected` (a
// Python expression): "ok", or what Python read. Also checks that only the
// opcodes MemoryViz.js reads were used.
std::string python_reads(const std::string& bytes, const std::string& expected) {
  testing::TempDir dir;
  const auto path = dir.path / "p.pickle";
  std::ofstream(path, std::ios::binary) << bytes;
  const std::string code = R"(
import pickle, pickletools, sys
data = open(sys.argv[1], 'rb').read()
allowed = {'PROTO', 'MARK', 'EMPTY_LIST', 'EMPTY_DICT', 'APPENDS', 'SETITEMS', 'TUPLE', 'EMPTY_TUPLE',
           'NONE', 'NEWTRUE', 'NEWFALSE', 'BININT1', 'BININT2', 'BININT', 'LONG1', 'BINFLOAT',
           'SHORT_BINUNICODE', 'BINUNICODE', 'BINPUT', 'LONG_BINPUT', 'BINGET', 'LONG_BINGET', 'STOP'}
used = {op.name for op, arg, pos in pickletools.genops(data)}
if not used <= allowed:
    print('opcodes outside the visualizer subset:', sorted(used - allowed))
    sys.exit(0)
got = pickle.loads(data)
want = eval(sys.argv[2])
print('ok' if repr(got) == repr(want) else 'got ' + ascii(got))
)";
  const testing::Output out = testing::run_child(kPython, {"-c", code, path.string(), expected});
  if (out.exit_code != 0) return "python failed: " + out.all();
  std::string s = out.out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class PickleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << "no " << kPython << " to read the pickles back";
  }
};

TEST_F(PickleTest, Scalars) {
  PickleWriter w;
  w.begin_list();
  w.none();
  w.boolean(true);
  w.boolean(false);
  for (int64_t v : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{65535}, int64_t{65536}, int64_t{-1},
                    int64_t{-129}, int64_t{2147483647}, int64_t{-2147483648}, int64_t{2147483648},
                    int64_t{-2147483649}, int64_t{1} << 40, -(int64_t{1} << 40), int64_t{0x7f12345678ab},
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()})
    w.integer(v);
  w.integer(std::numeric_limits<uint64_t>::max());
  w.integer(uint64_t{1} << 63);
  w.integer(uint64_t{42});
  w.floating(1.5);
  w.floating(-0.0);
  w.floating(1e300);
  w.floating(std::numeric_limits<double>::infinity());
  w.end_list();
  EXPECT_EQ(python_reads(w.finish(),
                         "[None, True, False, 0, 255, 256, 65535, 65536, -1, -129, 2**31-1, -2**31, 2**31, "
                         "-2**31-1, 2**40, -2**40, 0x7f12345678ab, 2**63-1, -2**63, 2**64-1, 2**63, 42, 1.5, "
                         "-0.0, 1e300, float('inf')]"),
            "ok");
}

TEST_F(PickleTest, Unicode) {
  PickleWriter w;
  w.begin_list();
  w.string("");
  w.string("a");
  w.string("\xC3\xA9");              // é
  w.string("\xE6\x97\xA5\xE6\x9C\xAC");  // 日本
  w.string("\xF0\x9F\x99\x82");      // 🙂
  w.string(std::string(300, 'x'));   // BINUNICODE
  w.string("bad \xFF byte");          // invalid UTF-8: U+FFFD
  w.string("cut \xE6\x97");           // a truncated sequence
  w.string("surrogate \xED\xA0\x80");  // encoded surrogates are invalid too
  w.end_list();
  EXPECT_EQ(python_reads(w.finish(),
                         "['', 'a', '\\u00e9', '\\u65e5\\u672c', '\\U0001f642', 'x' * 300, 'bad \\ufffd byte', "
                         "'cut \\ufffd\\ufffd', 'surrogate \\ufffd\\ufffd\\ufffd']"),
            "ok");
}

TEST_F(PickleTest, NestingAndEmptyContainers) {
  PickleWriter w;
  w.begin_dict();
  w.key("empty list");
  w.begin_list();
  w.end_list();
  w.key("empty dict");
  w.begin_dict();
  w.end_dict();
  w.key("empty tuple");
  w.begin_tuple();
  w.end_tuple();
  w.key("nested");
  w.begin_list();
  w.begin_list();
  w.begin_dict();
  w.key("x");
  w.begin_tuple();
  w.integer(1);
  w.string("two");
  w.none();
  w.end_tuple();
  w.end_dict();
  w.end_list();
  w.end_list();
  w.end_dict();
  EXPECT_EQ(python_reads(w.finish(),
                         "{'empty list': [], 'empty dict': {}, 'empty tuple': (), 'nested': [[{'x': (1, 'two', "
                         "None)}]]}"),
            "ok");
}

TEST_F(PickleTest, LargeContainersGoInBatches) {
  PickleWriter w;
  w.begin_dict();
  w.key("list");
  w.begin_list();
  for (int i = 0; i < 2500; ++i) w.integer(i);
  w.end_list();
  w.key("dict");
  w.begin_dict();
  for (int i = 0; i < 2001; ++i) {
    w.key("k" + std::to_string(i));
    w.integer(i * 7);
  }
  w.end_dict();
  w.end_dict();
  EXPECT_EQ(python_reads(w.finish(), "{'list': list(range(2500)), 'dict': {f'k{i}': i * 7 for i in range(2001)}}"),
            "ok");
}

TEST_F(PickleTest, MemoSharesObjects) {
  PickleWriter w;
  w.begin_list();
  w.begin_dict();
  const uint32_t id = w.put();
  w.key("name");
  w.string("frame");
  w.end_dict();
  w.get(id);
  // Past 256 memo entries, the long forms.
  std::vector<uint32_t> ids;
  for (int i = 0; i < 300; ++i) {
    w.string("s" + std::to_string(i));
    ids.push_back(w.put());
  }
  w.get(ids[299]);
  w.get(ids[0]);
  w.end_list();
  const std::string bytes = w.finish();
  EXPECT_EQ(python_reads(bytes, "[{'name': 'frame'}] * 2 + [f's{i}' for i in range(300)] + ['s299', 's0']"), "ok");
  // The two dicts are one object in Python.
  testing::TempDir dir;
  std::ofstream(dir.path / "m.pickle", std::ios::binary) << bytes;
  const testing::Output out = testing::run_child(
      kPython, {"-c", "import pickle,sys; o = pickle.load(open(sys.argv[1], 'rb')); print(o[0] is o[1])",
                (dir.path / "m.pickle").string()});
  EXPECT_EQ(out.out, "True\n") << out.all();
}

TEST(PickleWriter, MisuseIsAnInternalError) {
  PickleWriter w;
  w.begin_list();
  EXPECT_THROW(w.finish(), InternalError);
  EXPECT_THROW(w.end_dict(), InternalError);
  EXPECT_THROW(w.get(0), InternalError);
  PickleWriter d;
  d.begin_dict();
  d.key("k");
  EXPECT_THROW(d.end_dict(), InternalError);  // a key without its value
}

}  // namespace
}  // namespace dtr
