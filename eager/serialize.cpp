#include "eager/serialize.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eager/nn/module.h"
#include "eager/ops.h"
#include "eager/optim.h"

namespace dtr {

namespace {

// ---- dtype names ----------------------------------------------------------------

constexpr std::pair<DType, const char*> kDTypeNames[] = {
    {kFloat32, "F32"}, {kFloat64, "F64"}, {kFloat16, "F16"}, {kBFloat16, "BF16"},
    {kInt64, "I64"},   {kInt32, "I32"},   {kBool, "BOOL"},   {kUInt8, "U8"},
};

const char* safetensors_dtype(DType t) {
  for (const auto& [d, n] : kDTypeNames)
    if (d == t) return n;
  throw InternalError(fmt::format("save: dtype {} has no safetensors name", dtype_name(t)));
}

bool parse_safetensors_dtype(const std::string& name, DType& out) {
  for (const auto& [d, n] : kDTypeNames) {
    if (name == n) {
      out = d;
      return true;
    }
  }
  return false;
}

// Elements are stored little-endian; on a big-endian host swap each element.
void to_little_endian(std::vector<char>& bytes, int64_t item) {
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + size_t(item) <= bytes.size(); i += size_t(item))
      std::reverse(bytes.begin() + std::ptrdiff_t(i), bytes.begin() + std::ptrdiff_t(i + size_t(item)));
  } else {
    (void)bytes;
    (void)item;
  }
}

// ---- JSON writing -----------------------------------------------------------------

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", unsigned(c));
        } else {
          out += char(c);  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

// ---- JSON reading -----------------------------------------------------------------

// A parsed JSON value. Objects keep their members in file order.
struct JsonMember;
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  std::string text;  // a string's value or a number's literal
  std::vector<Json> items;
  // Not std::pair<std::string, Json>: a pair of an incomplete type does not
  // compile with clang and libstdc++; a vector of one declared later does.
  std::vector<JsonMember> members;
};
struct JsonMember {
  std::string first;  // the key
  Json second;
};

// A strict RFC 8259 parser for the header; nesting is bounded so a hostile
// file cannot exhaust the stack.
class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  Json parse_document() {
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(const std::string& what) const {
    throw ValueError(fmt::format("load: '{}': malformed safetensors header: {} at byte {} of the header",
                                 path_, what, pos_));
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(fmt::format("expected '{}'", c));
  }
  void literal(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) fail("invalid literal");
    pos_ += n;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of header");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::kObject;
      ++pos_;
      if (consume('}')) return v;
      do {
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
        std::string key = string();
        expect(':');
        v.members.push_back(JsonMember{std::move(key), value(depth + 1)});
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::kArray;
      ++pos_;
      if (consume(']')) return v;
      do {
        v.items.push_back(value(depth + 1));
      } while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::kString;
      v.text = string();
    } else if (c == 't') {
      literal("true");
      v.kind = Json::kBool;
      v.boolean = true;
    } else if (c == 'f') {
      literal("false");
      v.kind = Json::kBool;
    } else if (c == 'n') {
      literal("null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::kNumber;
      v.text = number();
    } else {
      fail(fmt::format("unexpected character '{}'", c));
    }
    return v;
  }

  std::string number() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == d) fail("invalid number");
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else {
      digits();
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      digits();
    }
    return s_.substr(start, pos_ - start);
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= unsigned(h - '0');
      else if (h >= 'a' && h <= 'f') v |= unsigned(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= unsigned(h - 'A' + 10);
      else fail("invalid \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("control character in string");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair
            if (s_.compare(pos_, 2, "\\u") != 0) fail("unpaired surrogate in \\u escape");
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(fmt::format("invalid escape '\\{}'", e));
      }
    }
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw ValueError(fmt::format("load: '{}': {}", path, what));
}

// A non-negative integer that fits in int64 (shape entries, offsets).
uint64_t json_index(const Json& v, const std::string& path, const std::string& where) {
  if (v.kind != Json::kNumber || v.text.empty() || v.text[0] == '-' ||
      v.text.find_first_of(".eE") != std::string::npos)
    bad_file(path, fmt::format("{} must be a non-negative integer", where));
  uint64_t x = 0;
  for (char c : v.text) {
    const uint64_t d = uint64_t(c - '0');
    if (x > (uint64_t(std::numeric_limits<int64_t>::max()) - d) / 10)
      bad_file(path, fmt::format("{} is too large ({})", where, v.text));
    x = x * 10 + d;
  }
  return x;
}

const Json* member(const Json& obj, const char* key) {
  for (const auto& [k, v] : obj.members)
    if (k == key) return &v;
  return nullptr;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit of the reference implementation

}  // namespace

void save(const std::string& path, const StateDict& tensors,
          const std::map<std::string, std::string>& metadata) {
  // Header and byte layout, in the dict's order.
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      if (it != metadata.begin()) header += ',';
      append_json_string(header, it->first);
      header += ':';
      append_json_string(header, it->second);
    }
    header += '}';
    first = false;
  }
  uint64_t offset = 0;
  std::vector<Tensor> host;
  for (const auto& [name, t] : tensors) {
    DTR_CHECK(!name.empty(), ValueError, "save: '{}': tensor names must not be empty", path);
    DTR_CHECK(name != "__metadata__", ValueError, "save: '{}': '__metadata__' is reserved", path);
    DTR_CHECK(t.defined(), ValueError, "save: '{}': tensor '{}' is undefined", path, name);
    const uint64_t nbytes = uint64_t(t.nbytes());
    if (!first) header += ',';
    first = false;
    append_json_string(header, name);
    header += fmt::format(":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          safetensors_dtype(t.dtype()), fmt::join(t.shape(), ","), offset,
                          offset + nbytes);
    offset += nbytes;
    host.push_back(t.device().is_cpu() ? t : t.cpu());
  }
  header += '}';
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  while (header.size() % 8 != 0) header += ' ';

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    DTR_CHECK(f.good(), ValueError, "save: cannot open '{}' for writing: {}", tmp, std::strerror(errno));
    unsigned char len[8];
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);
    f.write(reinterpret_cast<const char*>(len), 8);
    f.write(header.data(), std::streamsize(header.size()));
    std::vector<char> bytes;
    try {
      for (const Tensor& t : host) {
        bytes.resize(size_t(t.nbytes()));
        if (!bytes.empty()) detail::copy_elements_out(t, t.dtype(), bytes.data());
        to_little_endian(bytes, itemsize(t.dtype()));
        f.write(bytes.data(), std::streamsize(bytes.size()));
      }
    } catch (...) {  // reading a tensor failed: leave no partial file behind
      f.close();
      std::remove(tmp.c_str());
      throw;
    }
    f.flush();
    if (!f.good()) {
      f.close();
      std::remove(tmp.c_str());
      throw ValueError(fmt::format("save: writing '{}' failed: {}", tmp, std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw ValueError(fmt::format("save: cannot move '{}' to '{}': {}", tmp, path, why));
  }
}

StateDict load(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) bad_file(path, "cannot open file: it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) bad_file(path, fmt::format("cannot open file: {}", std::strerror(errno)));
  f.seekg(0, std::ios::end);
  const std::streamoff size_signed = f.tellg();
  if (size_signed < 0) bad_file(path, "cannot determine the file size");
  const uint64_t file_size = uint64_t(size_signed);
  f.seekg(0, std::ios::beg);
  if (file_size < 8)
    bad_file(path, fmt::format("truncated file: {} bytes, shorter than the 8-byte header length", file_size));
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  if (!f.good()) bad_file(path, "read error in the header length");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(len[i]) << (8 * i);
  if (header_len == 0) bad_file(path, "bad header length 0");
  if (header_len > kMaxHeaderBytes)
    bad_file(path, fmt::format("bad header length {} (more than {} bytes)", header_len, kMaxHeaderBytes));
  if (header_len > file_size - 8)
    bad_file(path, fmt::format("truncated file: header length {} but only {} bytes follow it",
                               header_len, file_size - 8));
  std::string header(size_t(header_len), '\0');
  f.read(header.data(), std::streamsize(header_len));
  if (!f.good()) bad_file(path, "read error in the header");
  const uint64_t data_size = file_size - 8 - header_len;

  const Json root = JsonParser(header, path).parse_document();
  if (root.kind != Json::kObject) bad_file(path, "the header is not a JSON object");

  std::vector<Entry> entries;
  std::unordered_set<std::string> seen;
  for (const auto& [name, info] : root.members) {
    if (!seen.insert(name).second) bad_file(path, fmt::format("duplicate entry '{}'", name));
    if (name == "__metadata__") {
      if (info.kind != Json::kObject) bad_file(path, "__metadata__ must be an object of strings");
      for (const auto& [k, v] : info.members) {
        if (v.kind != Json::kString)
          bad_file(path, fmt::format("__metadata__ value of '{}' is not a string", k));
        if (metadata != nullptr) (*metadata)[k] = v.text;
      }
      continue;
    }
    if (info.kind != Json::kObject) bad_file(path, fmt::format("entry '{}' is not an object", name));
    const Json* dtype = member(info, "dtype");
    const Json* shape = member(info, "shape");
    const Json* offsets = member(info, "data_offsets");
    if (dtype == nullptr || shape == nullptr || offsets == nullptr)
      bad_file(path, fmt::format("entry '{}' needs dtype, shape and data_offsets", name));
    Entry e{name, kFloat32, {}, 0, 0};
    if (dtype->kind != Json::kString) bad_file(path, fmt::format("dtype of '{}' is not a string", name));
    if (!parse_safetensors_dtype(dtype->text, e.dtype))
      bad_file(path, fmt::format("unknown or unsupported dtype '{}' for tensor '{}' (supported: F32, "
                                 "F64, F16, BF16, I64, I32, BOOL, U8)",
                                 dtype->text, name));
    if (shape->kind != Json::kArray) bad_file(path, fmt::format("shape of '{}' is not an array", name));
    if (shape->items.size() > 16)
      bad_file(path, fmt::format("tensor '{}' has {} dimensions (at most 16)", name, shape->items.size()));
    uint64_t elements = 1;
    bool overflow = false;
    for (const Json& d : shape->items) {
      const uint64_t n = json_index(d, path, fmt::format("a dimension of '{}'", name));
      e.shape.push_back(int64_t(n));
      if (n != 0 && elements > uint64_t(std::numeric_limits<int64_t>::max()) / n) overflow = true;
      elements *= n;
    }
    if (offsets->kind != Json::kArray || offsets->items.size() != 2)
      bad_file(path, fmt::format("data_offsets of '{}' must be [begin, end]", name));
    e.begin = json_index(offsets->items[0], path, fmt::format("data_offsets of '{}'", name));
    e.end = json_index(offsets->items[1], path, fmt::format("data_offsets of '{}'", name));
    if (e.end < e.begin)
      bad_file(path, fmt::format("data_offsets of '{}' are reversed: [{}, {}]", name, e.begin, e.end));
    if (e.end > data_size)
      bad_file(path, fmt::format("data_offsets of '{}' [{}, {}] are out of range: the data section "
                                 "has {} bytes (truncated file?)",
                                 name, e.begin, e.end, data_size));
    const uint64_t item = uint64_t(itemsize(e.dtype));
    if (overflow || elements > uint64_t(std::numeric_limits<int64_t>::max()) / item ||
        elements * item != e.end - e.begin)
      bad_file(path, fmt::format("tensor '{}' of dtype {} and shape {} needs {} bytes but "
                                 "data_offsets [{}, {}] span {}",
                                 name, dtype->text, shape_str(e.shape),
                                 overflow ? std::string("too many") : std::to_string(elements * item),
                                 e.begin, e.end, e.end - e.begin));
    entries.push_back(std::move(e));
  }
  // The byte ranges must tile the data section exactly, without gaps or overlaps.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  uint64_t expected = 0;
  for (const Entry* e : by_offset) {
    if (e->begin != expected)
      bad_file(path, fmt::format("data_offsets of '{}' start at {} but the previous tensor ends at {} "
                                 "(gap or overlap)",
                                 e->name, e->begin, expected));
    expected = e->end;
  }
  if (expected != data_size)
    bad_file(path, fmt::format("the tensors cover {} bytes but the data section has {}", expected, data_size));

  StateDict out;
  std::vector<char> bytes;
  for (const Entry& e : entries) {
    bytes.resize(size_t(e.end - e.begin));
    f.seekg(std::streamoff(8 + header_len + e.begin), std::ios::beg);
    if (!bytes.empty()) f.read(bytes.data(), std::streamsize(bytes.size()));
    if (!f.good()) bad_file(path, fmt::format("read error in the data of '{}'", e.name));
    to_little_endian(bytes, itemsize(e.dtype));
    if (e.dtype == kBool) {
      for (char b : bytes) {
        if (b != 0 && b != 1)
          bad_file(path, fmt::format("BOOL tensor '{}' holds byte value {}", e.name, int(static_cast<unsigned char>(b))));
      }
    }
    out.insert(e.name, detail::from_host(bytes.data(), numel(e.shape), e.dtype, e.shape, e.dtype));
  }
  return out;
}

namespace {

constexpr const char* kKindKey = "dtr.kind";

/// What a "dtr.kind" value names, for messages.
std::string kind_description(std::string_view kind) {
  if (kind == "tensor") return "a tensor";
  if (kind == "tensors") return "a tensor list";
  if (kind == "module") return "a module's state";
  if (kind == "optimizer") return "an optimizer's state";
  return fmt::format("'{}'", kind);
}

/// Reads `path`, checking that it was saved as `kind` when it says.
StateDict load_kind(const std::string& path, std::string_view kind) {
  std::map<std::string, std::string> metadata;
  StateDict state = load(path, &metadata);
  if (auto it = metadata.find(kKindKey); it != metadata.end()) {
    DTR_CHECK(it->second == kind, ValueError, "load: '{}' holds {}, not {}", path,
              kind_description(it->second), kind_description(kind));
  }
  return state;
}

StateDict numbered(const std::vector<Tensor>& tensors) {
  StateDict state;
  for (size_t i = 0; i < tensors.size(); ++i) state.insert(std::to_string(i), tensors[i]);
  return state;
}

}  // namespace

void save(const nn::Module& module, const std::string& path) {
  save(path, module.state_dict(), {{kKindKey, "module"}});
}

void load(nn::Module& module, const std::string& path) {
  module.load_state_dict(load_kind(path, "module"));
}

void save(const Tensor& tensor, const std::string& path) {
  DTR_CHECK(tensor.defined(), ValueError, "save: '{}': the tensor is undefined", path);
  save(path, numbered({tensor}), {{kKindKey, "tensor"}});
}

void save(const std::vector<Tensor>& tensors, const std::string& path) {
  save(path, numbered(tensors), {{kKindKey, "tensors"}});
}

void load(Tensor& tensor, const std::string& path) {
  StateDict state = load_kind(path, "tensor");
  DTR_CHECK(state.size() == 1, ValueError, "load: '{}' holds {} tensors, not one", path, state.size());
  tensor = state.items()[0].second;
}

void load(std::vector<Tensor>& tensors, const std::string& path) {
  StateDict state = load_kind(path, "tensors");
  std::vector<Tensor> out;
  out.reserve(state.size());
  for (const auto& [name, t] : state) out.push_back(t);
  tensors = std::move(out);
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  save(path, optimizer.state_dict(), {{kKindKey, "optimizer"}});
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  optimizer.load_state_dict(load_kind(path, "optimizer"));
}

}  // namespace dtr
