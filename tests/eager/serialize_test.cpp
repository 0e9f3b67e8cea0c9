// dtr::save / dtr::load in the safetensors format: round trips of every
// dtype, the exact bytes of a small file, module save/load, and
// hand-crafted malformed files that must throw ValueError naming the file
// and the problem.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Writes an 8-byte little-endian length (the header's, unless given), the header and the data.
std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                      std::optional<uint64_t> length = std::nullopt) {
  const std::string path = temp_path(name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) f.put(char((n >> (8 * i)) & 0xFF));
  f << header << data;
  return path;
}

void expect_load_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    load(path);
    ADD_FAILURE() << "no error loading " << path;
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(Serialize, RoundTripEveryDType) {
  StateDict d;
  d.insert("f32", from_vector(std::vector<float>{1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f}, {2, 3}));
  d.insert("f64", from_vector(std::vector<double>{3.141592653589793, -1e-300}, {2}));
  d.insert("f16", from_vector(std::vector<float>{0.1f, 65504.0f, -3.0f}, {3}, kFloat16));
  d.insert("bf16", from_vector(std::vector<float>{0.1f, -1e20f}, {1, 2}, kBFloat16));
  d.insert("i64", from_vector(std::vector<int64_t>{INT64_MIN, -1, INT64_MAX}, {3}));
  d.insert("i32", from_vector(std::vector<int32_t>{-7, 1 << 30}, {2, 1}));
  d.insert("bool", from_vector(std::vector<bool>{true, false, true}, {3}));
  d.insert("u8", from_vector(std::vector<uint8_t>{0, 200, 255}, {3}));
  d.insert("scalar", full({}, 2.5));
  d.insert("empty", zeros({0, 4}));
  d.insert("a \"quoted\"\\name\n", ones({1}));
  d.insert("unicode \xc3\xa9", ones({1}));
  // A strided view is saved in row-major order of its elements.
  d.insert("view", from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1));
  const std::map<std::string, std::string> meta{{"format", "pt"}, {"step", "12"}};
  const std::string path = temp_path("roundtrip.safetensors");
  save(path, d, meta);
  std::map<std::string, std::string> got_meta;
  const StateDict got = load(path, &got_meta);
  EXPECT_EQ(got_meta, meta);
  EXPECT_EQ(got.keys(), d.keys());
  for (const auto& [name, t] : d) {
    const Tensor& g = got.at(name);
    EXPECT_EQ(g.dtype(), t.dtype()) << name;
    EXPECT_EQ(g.shape(), t.shape()) << name;
    if (t.dtype() == kInt64) {
      EXPECT_EQ(g.to_vector<int64_t>(), t.to_vector<int64_t>());
    } else {
      EXPECT_TRUE(testing::bitwise_equal(g, t)) << name;
    }
    EXPECT_FALSE(g.requires_grad());
  }
  EXPECT_EQ(got.at("view").to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_TRUE(got.at("view").is_contiguous());
  // Loaded tensors are constants: owned bytes, no lineage.
  EXPECT_EQ(remat::producer(*got.at("f32").storage()), nullptr);
  std::remove(path.c_str());
}

TEST(Serialize, FileBytesFollowTheFormat) {
  // The same bytes safetensors.torch.save_file({"w": torch.tensor([1., 2.])}) writes.
  const std::string path = temp_path("bytes.safetensors");
  save(path, StateDict{{"w", from_vector(std::vector<float>{1.0f, 2.0f})}});
  const std::string bytes = read_bytes(path);
  const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  ASSERT_EQ(bytes.size(), 8 + padded.size() + 8);
  EXPECT_EQ(uint8_t(bytes[0]), padded.size());
  for (int i = 1; i < 8; ++i) EXPECT_EQ(bytes[size_t(i)], 0);
  EXPECT_EQ(bytes.substr(8, padded.size()), padded);
  EXPECT_EQ(bytes.substr(8 + padded.size()), std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
  std::remove(path.c_str());
}

TEST(Serialize, ReadsHandWrittenFiles) {
  // Reordered offsets, extra whitespace, escapes and metadata, as other writers produce.
  const std::string header =
      " { \"__metadata__\" : {\"k\":\"v\\u00e9\"},\n \"b\": {\"dtype\":\"I32\", \"shape\": [], "
      "\"data_offsets\": [8, 12]},\n \"a\\/x\": {\"shape\":[2],\"dtype\":\"U8\",\"data_offsets\":[0,2]},"
      " \"pad\": {\"dtype\":\"U8\",\"shape\":[6],\"data_offsets\":[2,8]} }  ";
  std::string data = std::string("\x05\x06", 2) + std::string(6, '\0') + std::string("\xfe\xff\xff\xff", 4);
  const std::string path = write_raw("hand.safetensors", header, data);
  std::map<std::string, std::string> meta;
  const StateDict d = load(path, &meta);
  EXPECT_EQ(meta.at("k"), "v\xc3\xa9");
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"b", "a/x", "pad"}));
  EXPECT_EQ(d.at("b").item<int64_t>(), -2);
  EXPECT_EQ(d.at("b").dim(), 0);
  EXPECT_EQ(d.at("a/x").to_vector<int64_t>(), (std::vector<int64_t>{5, 6}));
}

TEST(Serialize, MalformedFilesThrowValueError) {
  const std::string ok_entry = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  // Missing file, a directory.
  expect_load_error(temp_path("does_not_exist.safetensors"), {"cannot open"});
  expect_load_error(::testing::TempDir(), {"directory"});
  // Shorter than the length prefix.
  {
    const std::string path = temp_path("short.safetensors");
    std::ofstream(path, std::ios::binary) << "abc";
    expect_load_error(path, {"truncated", "3 bytes"});
  }
  expect_load_error(write_raw("len0.safetensors", "", ""), {"header length 0"});
  expect_load_error(write_raw("longlen.safetensors", "{" + ok_entry + "}", eight, 1000), {"truncated", "1000"});
  expect_load_error(write_raw("hugelen.safetensors", "{}", "", uint64_t(1) << 62), {"bad header length"});
  // Truncated data: the offsets point past the end.
  expect_load_error(write_raw("truncdata.safetensors", "{" + ok_entry + "}", "1234"), {"out of range", "'x'"});
  // JSON problems.
  expect_load_error(write_raw("json1.safetensors", "{" + ok_entry, eight), {"malformed"});
  expect_load_error(write_raw("json2.safetensors", "[1,2]", ""), {"not a JSON object"});
  expect_load_error(write_raw("json3.safetensors", "{\"x\":{\"dtype\":\"F32\",}}", ""), {"malformed"});
  expect_load_error(write_raw("json4.safetensors", "{} trailing", ""), {"trailing"});
  expect_load_error(write_raw("json5.safetensors", std::string(200, '[') , ""), {"nesting"});
  expect_load_error(write_raw("json6.safetensors", "{\"a\xff\":\"\\x\"}", ""), {"escape"});
  expect_load_error(write_raw("json7.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", eight),
                    {"needs dtype, shape and data_offsets"});
  // Unknown dtype.
  expect_load_error(write_raw("dtype.safetensors", R"({"x":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})", eight),
                    {"unknown or unsupported dtype 'I8'"});
  // Shape / size disagreement, negative and fractional dimensions.
  expect_load_error(write_raw("size.safetensors", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
                    {"needs 12 bytes"});
  expect_load_error(write_raw("neg.safetensors", R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
                    {"non-negative integer"});
  expect_load_error(write_raw("frac.safetensors", R"({"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight),
                    {"non-negative integer"});
  expect_load_error(write_raw("overflow.safetensors",
                              R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight),
                    {"too many"});
  // Offsets reversed, with a gap, overlapping, or not covering the data.
  expect_load_error(write_raw("rev.safetensors", R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight),
                    {"reversed"});
  expect_load_error(write_raw("gap.safetensors", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
                    {"gap or overlap"});
  expect_load_error(write_raw("overlap.safetensors",
                              R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                              eight),
                    {"gap or overlap"});
  expect_load_error(write_raw("extra.safetensors", "{" + ok_entry + "}", eight + "xx"), {"cover 8 bytes", "has 10"});
  // Duplicate names, bad metadata, bad bool bytes.
  expect_load_error(write_raw("dup.safetensors", "{" + ok_entry + "," + ok_entry + "}", eight), {"duplicate entry 'x'"});
  expect_load_error(write_raw("meta.safetensors", R"({"__metadata__":{"a":1}})", ""), {"not a string"});
  expect_load_error(write_raw("bool.safetensors", R"({"x":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"),
                    {"byte value 2"});
}

TEST(Serialize, SaveErrors) {
  EXPECT_THROW(save(temp_path("no_such_dir/x.safetensors"), StateDict{{"x", ones({1})}}), ValueError);
  EXPECT_THROW(save(temp_path("u.safetensors"), StateDict{{"x", Tensor()}}), ValueError);
  EXPECT_THROW(save(temp_path("m.safetensors"), StateDict{{"__metadata__", ones({1})}}), ValueError);
  EXPECT_THROW(save(temp_path("e.safetensors"), StateDict{{"", ones({1})}}), ValueError);
}

TEST(Serialize, ModuleSaveAndLoad) {
  manual_seed(1);
  nn::Sequential a(nn::Linear(3, 4), nn::BatchNorm2d(4),
                   nn::LayerNorm(std::vector<int64_t>{4}));
  manual_seed(2);
  nn::Sequential b(nn::Linear(3, 4), nn::BatchNorm2d(4),
                   nn::LayerNorm(std::vector<int64_t>{4}));
  {
    NoGradGuard ng;
    a->named_buffers()[0].second.fill_(0.25);  // 1.running_mean
  }
  const std::string path = temp_path("module.safetensors");
  save(*a, path);
  load(*b, path);
  for (const auto& [name, t] : a->state_dict()) {
    if (t.dtype() == kInt64) {
      EXPECT_EQ(b->state_dict().at(name).to_vector<int64_t>(), t.to_vector<int64_t>());
    }
    else EXPECT_TRUE(testing::bitwise_equal(b->state_dict().at(name), t)) << name;
  }
  // A module of another shape refuses the file.
  nn::Sequential c(nn::Linear(3, 5));
  try {
    load(*c, path);
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("0.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Unexpected key(s)"), std::string::npos) << msg;
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dtr
