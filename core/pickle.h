// A small writer of Python pickles (protocol 4) for plain data: None, bools,
// integers (any 64-bit value, signed or unsigned), floats, strings, lists,
// tuples and dicts, nested as the caller writes them. What it writes is read
// by Python's pickle.loads and by PyTorch's memory visualizer, whose own
// unpickler (torch/utils/viz/MemoryViz.js) knows only a subset of the
// opcodes: this writer uses only that subset (PROTO, MARK, EMPTY_LIST,
// EMPTY_DICT, APPENDS, SETITEMS, TUPLE, EMPTY_TUPLE, NONE, NEWTRUE, NEWFALSE,
// BININT1, BININT2, BININT, LONG1, BINFLOAT, SHORT_BINUNICODE, BINUNICODE,
// BINPUT, LONG_BINPUT, BINGET, LONG_BINGET, STOP). dtr's memory snapshots
// (remat/memory_snapshot.h) are written with it.
//
//   PickleWriter w;
//   w.begin_dict();
//   w.key("segments"); w.begin_list(); ...; w.end_list();
//   w.end_dict();
//   std::string bytes = w.finish();
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtr {

class PickleWriter {
 public:
  PickleWriter();

  void none();
  void boolean(bool v);
  void integer(int64_t v);
  void integer(uint64_t v);
  void integer(int v) { integer(int64_t(v)); }
  void floating(double v);
  /// A str. Invalid UTF-8 is replaced by U+FFFD (Python would refuse it).
  void string(std::string_view s);

  /// A list (or a tuple) whose items are the values written until the
  /// matching end. Items go in batches of 1000, as Python's own pickler
  /// writes them (the visualizer spreads a batch into one call).
  void begin_list();
  void end_list();
  void begin_tuple();
  void end_tuple();
  /// A dict: per entry its key (key(k), or any value written, get() of a
  /// memoized string included) then its value, until end_dict.
  void begin_dict();
  void key(std::string_view k);
  void end_dict();

  /// Remembers the value just written (a container: right after its begin)
  /// and returns its memo id; get(id) writes the same object again (Python
  /// then shares it), so a repeated value is stored once.
  uint32_t put();
  void get(uint32_t id);

  /// Ends the pickle (STOP) and returns its bytes; the writer is then empty.
  /// Throws InternalError when a container is still open.
  std::string finish();

  size_t size() const { return out_.size(); }

 private:
  enum class Kind : uint8_t { kList, kTuple, kDict };
  struct Open {
    Kind kind;
    uint32_t batch = 0;  // items (dict: entries) since the last MARK
    bool expect_value = false;  // dict: a key was written, its value is next
  };
  void before_value();
  void op(uint8_t code) { out_.push_back(char(code)); }
  void le(uint64_t v, int bytes);

  std::string out_;
  std::vector<Open> open_;
  uint32_t next_memo_ = 0;
};

}  // namespace dtr
