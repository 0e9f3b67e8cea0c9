#include "core/pickle.h"

#include <bit>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace dtr {
namespace {

// Opcodes (Python's Lib/pickle.py names).
constexpr uint8_t kProto = 0x80, kStop = '.', kMark = '(', kNone = 'N', kNewTrue = 0x88, kNewFalse = 0x89,
                  kBinInt1 = 'K', kBinInt2 = 'M', kBinInt = 'J', kLong1 = 0x8a, kBinFloat = 'G',
                  kShortBinUnicode = 0x8c, kBinUnicode = 'X', kEmptyList = ']', kAppends = 'e',
                  kEmptyDict = '}', kSetItems = 'u', kEmptyTuple = ')', kTuple = 't', kBinPut = 'q',
                  kLongBinPut = 'r', kBinGet = 'h', kLongBinGet = 'j';
constexpr uint32_t kBatch = 1000;  // pickle.py's _BATCHSIZE

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

}  // namespace

PickleWriter::PickleWriter() {
  op(kProto);
  op(4);
}

void PickleWriter::le(uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(char((v >> (8 * i)) & 0xFF));
}

// A value is about to be written: inside a list, open a batch (MARK) or
// close a full one; inside a dict, a key must have come first.
void PickleWriter::before_value() {
  if (open_.empty()) return;
  Open& o = open_.back();
  if (o.kind == Kind::kList) {
    if (o.batch == kBatch) {
      op(kAppends);
      o.batch = 0;
    }
    if (o.batch++ == 0) op(kMark);
  } else if (o.kind == Kind::kDict) {
    if (o.expect_value) {  // the value of the last key
      o.expect_value = false;
      return;
    }
    if (o.batch == kBatch) {  // a key
      op(kSetItems);
      o.batch = 0;
    }
    if (o.batch++ == 0) op(kMark);
    o.expect_value = true;
  }
}

void PickleWriter::none() {
  before_value();
  op(kNone);
}

void PickleWriter::boolean(bool v) {
  before_value();
  op(v ? kNewTrue : kNewFalse);
}

void PickleWriter::integer(int64_t v) {
  before_value();
  if (v >= 0 && v < 256) {
    op(kBinInt1);
    le(uint64_t(v), 1);
  } else if (v >= 0 && v < 65536) {
    op(kBinInt2);
    le(uint64_t(v), 2);
  } else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
    op(kBinInt);
    le(uint64_t(uint32_t(int32_t(v))), 4);
  } else {
    // LONG1: the fewest little-endian two's-complement bytes that keep the sign.
    int n = 8;
    while (n > 1) {
      const int64_t shifted = v >> (8 * (n - 1) - 1);  // the top byte and the sign bit below it
      if (shifted != 0 && shifted != -1) break;
      --n;
    }
    op(kLong1);
    op(uint8_t(n));
    le(uint64_t(v), n);
  }
}

void PickleWriter::integer(uint64_t v) {
  if (v <= uint64_t(std::numeric_limits<int64_t>::max())) return integer(int64_t(v));
  before_value();
  op(kLong1);
  op(9);  // eight bytes of value and a zero byte: positive
  le(v, 8);
  op(0);
}

void PickleWriter::floating(double v) {
  before_value();
  op(kBinFloat);
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  for (int i = 7; i >= 0; --i) out_.push_back(char((bits >> (8 * i)) & 0xFF));  // big-endian
}

void PickleWriter::string(std::string_view s) {
  before_value();
  std::string fixed;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      if (fixed.empty()) fixed.assign(s.substr(0, i));
      fixed += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    if (!fixed.empty()) fixed.append(s.substr(i, n));
    i += n;
  }
  if (!fixed.empty()) s = fixed;
  if (s.size() < 256) {
    op(kShortBinUnicode);
    le(s.size(), 1);
  } else {
    DTR_CHECK(s.size() <= std::numeric_limits<uint32_t>::max(), ValueError,
              "PickleWriter: a string of {} bytes is past BINUNICODE's 4 GiB", s.size());
    op(kBinUnicode);
    le(s.size(), 4);
  }
  out_.append(s);
}

void PickleWriter::begin_list() {
  before_value();
  op(kEmptyList);
  open_.push_back({Kind::kList});
}

void PickleWriter::end_list() {
  DTR_INTERNAL_ASSERT(!open_.empty() && open_.back().kind == Kind::kList, "PickleWriter: end_list without a list");
  if (open_.back().batch > 0) op(kAppends);
  open_.pop_back();
}

void PickleWriter::begin_tuple() {
  before_value();
  op(kMark);
  open_.push_back({Kind::kTuple});
}

void PickleWriter::end_tuple() {
  DTR_INTERNAL_ASSERT(!open_.empty() && open_.back().kind == Kind::kTuple, "PickleWriter: end_tuple without a tuple");
  op(kTuple);
  open_.pop_back();
}

void PickleWriter::begin_dict() {
  before_value();
  op(kEmptyDict);
  open_.push_back({Kind::kDict});
}

void PickleWriter::key(std::string_view k) {
  DTR_INTERNAL_ASSERT(!open_.empty() && open_.back().kind == Kind::kDict && !open_.back().expect_value,
                      "PickleWriter: key outside a dict or before the last key's value");
  string(k);
}

void PickleWriter::end_dict() {
  DTR_INTERNAL_ASSERT(!open_.empty() && open_.back().kind == Kind::kDict && !open_.back().expect_value,
                      "PickleWriter: end_dict without a dict, or a key without its value");
  if (open_.back().batch > 0) op(kSetItems);
  open_.pop_back();
}

uint32_t PickleWriter::put() {
  const uint32_t id = next_memo_++;
  if (id < 256) {
    op(kBinPut);
    le(id, 1);
  } else {
    op(kLongBinPut);
    le(id, 4);
  }
  return id;
}

void PickleWriter::get(uint32_t id) {
  DTR_INTERNAL_ASSERT(id < next_memo_, "PickleWriter: get of a memo id never put");
  before_value();
  if (id < 256) {
    op(kBinGet);
    le(id, 1);
  } else {
    op(kLongBinGet);
    le(id, 4);
  }
}

std::string PickleWriter::finish() {
  DTR_INTERNAL_ASSERT(open_.empty(), "PickleWriter: finish with a container open");
  op(kStop);
  std::string out = std::move(out_);
  out_.clear();
  next_memo_ = 0;
  op(kProto);
  op(4);
  return out;
}

}  // namespace dtr
