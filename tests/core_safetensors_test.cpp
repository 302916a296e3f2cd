// safetensors: byte-exact output against a buffer written by hand from the format spec
// (https://github.com/huggingface/safetensors, README "Format"), interoperability with a
// by-hand Python/numpy parser and writer, and rejection of malformed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::TempDir;

std::vector<std::byte> bytes_of(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

void append_le64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

void append_hex(std::vector<std::byte>& out, const std::vector<int>& bytes) {
  for (int b : bytes) out.push_back(static_cast<std::byte>(b));
}

// A safetensors buffer: 8-byte little-endian header length, header text, data.
std::vector<std::byte> make_buffer(const std::string& header, const std::vector<std::byte>& data) {
  std::vector<std::byte> out;
  append_le64(out, header.size());
  auto h = bytes_of(header);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Runs `fn`, expects it to throw tensorhub::Error of kind DataLoss whose message names
// `source`; returns the message for further checks.
template <typename Fn>
std::string expect_data_loss(Fn&& fn, const std::string& source, const std::string& label) {
  const std::string message = testing::error_message_of(ErrorKind::kDataLoss, fn, label);
  EXPECT_NE(message.find(source), std::string::npos) << label << ": message does not name the source: " << message;
  return message;
}

// ---- byte-exact writer output ---------------------------------------------------------------

TEST(Tensor, ShapeToString) {
  EXPECT_EQ(shape_to_string(std::vector<std::int64_t>{28, 28, 1}), "[28, 28, 1]");
  EXPECT_EQ(shape_to_string(std::vector<std::int64_t>{}), "[]");
  EXPECT_EQ(shape_to_string(std::vector<std::int64_t>{-1, 784}, ","), "[-1,784]");
}

TEST(Safetensors, SingleTensorByteExact) {
  NamedTensors tensors;
  tensors["a"] = Tensor::from<float>(DType::kF32, {2}, {1.0f, -2.0f});

  // Written by hand from the spec: the header is the compact JSON
  //   {"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}   (54 bytes)
  // padded with 2 spaces to 56 so the data starts 8-byte aligned (8 + 56 = 64), as the
  // reference writer pads; then 1.0f = 00 00 80 3f and -2.0f = 00 00 00 c0 (little endian).
  std::vector<std::byte> expected;
  append_hex(expected, {0x38, 0, 0, 0, 0, 0, 0, 0});  // 56
  const auto header = bytes_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"
                               "  ");
  expected.insert(expected.end(), header.begin(), header.end());
  append_hex(expected, {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0});
  ASSERT_EQ(expected.size(), 72u);

  const auto written = to_safetensors(tensors);
  ASSERT_EQ(written.size(), expected.size());
  EXPECT_EQ(std::memcmp(written.data(), expected.data(), expected.size()), 0)
      << "got: " << std::string(reinterpret_cast<const char*>(written.data()), written.size());

  // And the hand-written buffer reads back to the same tensor.
  const auto back = from_safetensors(expected, "hand-written");
  ASSERT_EQ(back.size(), 1u);
  const Tensor& a = back.at("a");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2}));
  ASSERT_EQ(a.data.size(), 8u);
  EXPECT_EQ(a.as<float>()[0], 1.0f);
  EXPECT_EQ(a.as<float>()[1], -2.0f);
}

TEST(Safetensors, TwoTensorsWithMetadataByteExact) {
  NamedTensors tensors;
  // Inserted in reverse name order: the header and the data are in name order regardless.
  tensors["b"] = Tensor::from<std::uint8_t>(DType::kU8, {1, 3}, {1, 2, 255});
  tensors["a"] = Tensor::from<float>(DType::kF32, {2}, {1.0f, -2.0f});

  // {"__metadata__":{"format":"pt"},"a":{...[0,8]},"b":{...[8,11]}} is 140 bytes; padded
  // with 4 spaces to 144 (8 + 144 = 152 = 19 * 8).
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[1,3],"data_offsets":[8,11]}})"
      "    ";
  ASSERT_EQ(header.size(), 144u);
  std::vector<std::byte> data;
  append_hex(data, {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x01, 0x02, 0xff});
  const auto expected = make_buffer(header, data);
  ASSERT_EQ(expected.size(), 163u);

  const auto written = to_safetensors(tensors, {{"format", "pt"}});
  ASSERT_EQ(written.size(), expected.size());
  EXPECT_EQ(std::memcmp(written.data(), expected.data(), expected.size()), 0)
      << "got: " << std::string(reinterpret_cast<const char*>(written.data()), written.size());

  TensorMetadata meta;
  const auto back = from_safetensors(expected, "hand-written", &meta);
  EXPECT_EQ(meta, (TensorMetadata{{"format", "pt"}}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at("b").dtype, DType::kU8);
  EXPECT_EQ(back.at("b").shape, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(back.at("b").as<std::uint8_t>()[2], 255);
}

TEST(Safetensors, RoundTripAllDtypesBitExact) {
  NamedTensors tensors;
  const float nan_payload = [] {
    std::uint32_t bits = 0x7fc01234u;  // a NaN with a payload must survive bit for bit
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }();
  tensors["f32"] = Tensor::from<float>(DType::kF32, {2, 3},
                                       {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(),
                                        std::numeric_limits<float>::infinity(), nan_payload, 3.25f});
  tensors["f64"] = Tensor::from<double>(DType::kF64, {2}, {-1e300, 0.1});
  tensors["i64"] = Tensor::from<std::int64_t>(
      DType::kI64, {3}, {std::numeric_limits<std::int64_t>::min(), -1, std::numeric_limits<std::int64_t>::max()});
  tensors["i32"] = Tensor::from<std::int32_t>(DType::kI32, {1, 1, 2}, {-7, 1 << 30});
  tensors["i8"] = Tensor::from<std::int8_t>(DType::kI8, {2}, {-128, 127});
  tensors["bool"] = Tensor::from<std::uint8_t>(DType::kBool, {3}, {1, 0, 1});
  tensors["scalar"] = Tensor::from<float>(DType::kF32, {}, {42.5f});
  tensors["empty"] = Tensor::from<float>(DType::kF32, {0, 4}, {});

  const auto back = from_safetensors(to_safetensors(tensors), "round trip");
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(back.count(name)) << name;
    const Tensor& b = back.at(name);
    EXPECT_EQ(b.dtype, t.dtype) << name;
    EXPECT_EQ(b.shape, t.shape) << name;
    EXPECT_EQ(b.data, t.data) << name;
  }
  std::uint32_t bits;
  std::memcpy(&bits, back.at("f32").data.data() + 4 * 4, 4);
  EXPECT_EQ(bits, 0x7fc01234u);
  EXPECT_EQ(back.at("scalar").numel(), 1);
  EXPECT_EQ(back.at("empty").numel(), 0);
}

TEST(Safetensors, ViewsWriteTheBytesOfTheTensorsTheyView) {
  NamedTensors tensors;
  tensors["b"] = Tensor::from<std::int64_t>(DType::kI64, {2}, {-5, 7});
  tensors["a"] = Tensor::from<float>(DType::kF32, {1, 3}, {1.5f, 0.0f, -2.0f});
  tensors["s"] = Tensor::from<double>(DType::kF64, {}, {0.25});
  // The views are of copies held elsewhere (as numpy arrays would be): no byte comes from `tensors`.
  const NamedTensors held = tensors;
  NamedTensorViews views = views_of(held);
  std::vector<std::byte> written;
  const std::uint64_t n = write_safetensors_to(views, [&](std::span<const std::byte> b) {
    written.insert(written.end(), b.begin(), b.end());
  }, {{"k", "v"}});
  EXPECT_EQ(written, to_safetensors(tensors, {{"k", "v"}}));
  EXPECT_EQ(n, written.size());
  // A view whose byte count does not fit its shape is refused as a tensor's would be.
  views["a"].data = views["a"].data.first(8);
  EXPECT_NE(testing::error_message_of(ErrorKind::kInvalidArgument,
                                      [&] { write_safetensors_to(views, [](std::span<const std::byte>) {}); }, "short view")
                .find("tensor \"a\": 8 bytes do not match"),
            std::string::npos);
}

TEST(Safetensors, WriterRejectsDataThatDoesNotMatchShape) {
  NamedTensors tensors;
  Tensor t;
  t.dtype = DType::kF32;
  t.shape = {3};
  t.data.resize(8);  // 2 floats for a shape of 3
  tensors["bad"] = t;
  testing::expect_error([&] { to_safetensors(tensors); }, ErrorKind::kInvalidArgument, {"bad"});
}

TEST(Safetensors, WriterRefusesATensorNamedMetadata) {
  // Any reader takes a "__metadata__" header key for the metadata map, so such a tensor would
  // not survive a round trip: the writer refuses it, naming the tensor (and the file).
  NamedTensors tensors;
  tensors["__metadata__"] = Tensor::from<float>(DType::kF32, {1}, {1.0f});
  tensors["w"] = Tensor::from<float>(DType::kF32, {1}, {2.0f});
  testing::expect_error([&] { to_safetensors(tensors); }, ErrorKind::kInvalidArgument, {"\"__metadata__\""});
  TempDir dir;
  const auto path = dir / "m.safetensors";
  try {
    write_safetensors(path, tensors, {{"k", "v"}});
    FAIL() << "expected InvalidArgument";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("\"__metadata__\""), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST(Safetensors, FileHelpersRoundTripAndAtomicWrite) {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  NamedTensors tensors;
  tensors["w"] = Tensor::from<float>(DType::kF32, {2, 2}, {1, 2, 3, 4});
  write_safetensors(path, tensors, {{"k", "v"}});
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  EXPECT_EQ(read_file_bytes(path), to_safetensors(tensors, {{"k", "v"}}));
  TensorMetadata meta;
  const auto back = read_safetensors(path, &meta);
  EXPECT_EQ(back.at("w").data, tensors.at("w").data);
  EXPECT_EQ(meta.at("k"), "v");

  try {
    read_safetensors(dir / "missing.safetensors");
    FAIL() << "expected Unavailable";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(e.message().find("missing.safetensors"), std::string::npos) << e.what();
  }
}

// ---- Python compatibility -------------------------------------------------------------------

// A by-hand safetensors reader in Python (json + struct + numpy), independent of our code.
constexpr const char* kPythonReader = R"py(
import json, struct, sys
import numpy as np
DT = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4", "U8": "u1", "I8": "i1", "BOOL": "?"}
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n].decode("utf-8"))
assert (8 + n) % 8 == 0, "data not 8-byte aligned"
data = raw[8 + n:]
out = {"__metadata__": header.pop("__metadata__", None), "tensors": {}}
for name, info in header.items():
    b, e = info["data_offsets"]
    arr = np.frombuffer(data[b:e], dtype=np.dtype(DT[info["dtype"]])).reshape(info["shape"])
    out["tensors"][name] = {"dtype": info["dtype"], "shape": list(arr.shape),
                            "values": arr.reshape(-1).tolist()}
print(json.dumps(out))
)py";

// A by-hand writer: Python's json.dumps spacing, no padding, data in a different order than
// the names.
constexpr const char* kPythonWriter = R"py(
import json, struct, sys
import numpy as np
z = np.array([[1.5, -2.25, 3.0], [4.0, 5.5, -6.0]], dtype="<f4")
a = np.array([-3, 0, 9000000000], dtype="<i8")
m = np.array([True, False, True, True], dtype="?")
blobs = [("z", "F32", z), ("a", "I64", a), ("m", "BOOL", m)]
header, data = {}, b""
for name, dt, arr in blobs:
    header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [len(data), len(data) + arr.nbytes]}
    data += arr.tobytes()
header["__metadata__"] = {"writer": "numpy"}
h = json.dumps(header).encode("utf-8")
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
)py";

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

TEST(Safetensors, PythonNumpyReadsWhatWeWrite) {
  TempDir dir;
  write_text(dir / "reader.py", kPythonReader);
  NamedTensors tensors;
  tensors["weights"] = Tensor::from<float>(DType::kF32, {2, 3}, {0.5f, -1.0f, 2.0f, 3.75f, -0.125f, 1e10f});
  tensors["bias"] = Tensor::from<double>(DType::kF64, {3}, {0.1, -0.2, 1e-300});
  tensors["labels"] = Tensor::from<std::int64_t>(DType::kI64, {4}, {0, -1, 9, 1LL << 40});
  tensors["pixels"] = Tensor::from<std::uint8_t>(DType::kU8, {1, 2, 2}, {0, 7, 128, 255});
  tensors["mask"] = Tensor::from<std::uint8_t>(DType::kBool, {2}, {1, 0});
  tensors["count"] = Tensor::from<std::int32_t>(DType::kI32, {}, {-5});
  write_safetensors(dir / "t.safetensors", tensors, {{"framework", "tensorhub"}});

  const std::string out = testing::run_command("/usr/bin/python3 " + (dir / "reader.py").string() + " " +
                                               (dir / "t.safetensors").string());
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["__metadata__"], nlohmann::json({{"framework", "tensorhub"}}));
  const auto& t = j["tensors"];
  ASSERT_EQ(t.size(), 6u) << out;
  EXPECT_EQ(t["weights"]["dtype"], "F32");
  EXPECT_EQ(t["weights"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(t["weights"]["values"], nlohmann::json({0.5, -1.0, 2.0, 3.75, -0.125, 1e10}));
  EXPECT_EQ(t["bias"]["shape"], nlohmann::json({3}));
  EXPECT_EQ(t["bias"]["values"], nlohmann::json({0.1, -0.2, 1e-300}));  // repr round-trips doubles
  EXPECT_EQ(t["labels"]["values"], nlohmann::json({0, -1, 9, 1LL << 40}));
  EXPECT_EQ(t["pixels"]["shape"], nlohmann::json({1, 2, 2}));
  EXPECT_EQ(t["pixels"]["values"], nlohmann::json({0, 7, 128, 255}));
  EXPECT_EQ(t["mask"]["values"], nlohmann::json({true, false}));
  EXPECT_EQ(t["count"]["shape"], nlohmann::json::array());
  EXPECT_EQ(t["count"]["values"], nlohmann::json({-5}));
}

TEST(Safetensors, WeReadWhatPythonNumpyWrites) {
  TempDir dir;
  write_text(dir / "writer.py", kPythonWriter);
  testing::run_command("/usr/bin/python3 " + (dir / "writer.py").string() + " " + (dir / "py.safetensors").string());
  TensorMetadata meta;
  const auto t = read_safetensors(dir / "py.safetensors", &meta);
  EXPECT_EQ(meta, (TensorMetadata{{"writer", "numpy"}}));
  ASSERT_EQ(t.size(), 3u);
  const Tensor& z = t.at("z");
  EXPECT_EQ(z.dtype, DType::kF32);
  EXPECT_EQ(z.shape, (std::vector<std::int64_t>{2, 3}));
  const std::vector<float> zv(z.as<float>(), z.as<float>() + 6);
  EXPECT_EQ(zv, (std::vector<float>{1.5f, -2.25f, 3.0f, 4.0f, 5.5f, -6.0f}));
  const Tensor& a = t.at("a");
  EXPECT_EQ(a.dtype, DType::kI64);
  const std::vector<std::int64_t> av(a.as<std::int64_t>(), a.as<std::int64_t>() + 3);
  EXPECT_EQ(av, (std::vector<std::int64_t>{-3, 0, 9000000000LL}));
  const Tensor& m = t.at("m");
  EXPECT_EQ(m.dtype, DType::kBool);
  EXPECT_EQ(m.data, (std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{1}, std::byte{1}}));
}

// ---- malformed input ------------------------------------------------------------------------

constexpr const char* kSource = "blob 0123-test-source";

std::vector<std::byte> eight_bytes() {
  std::vector<std::byte> d;
  append_hex(d, {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0});
  return d;
}

// ---- the streaming decoder -------------------------------------------------------------------

// What SafetensorsDecoder gives for `bytes` fed in pieces of `piece` bytes: the tensors and
// metadata, or the error's what() text.
struct Decoded {
  NamedTensors tensors;
  TensorMetadata metadata;
  std::string error;
};
Decoded decode_in_pieces(const std::vector<std::byte>& bytes, std::uint64_t size, std::size_t piece,
                         const std::string& source) {
  Decoded out;
  SafetensorsDecoder decoder(size, source, &out.metadata);
  for (std::size_t i = 0; i < bytes.size(); i += piece) {
    const std::span<const std::byte> all(bytes);
    EXPECT_NO_THROW(decoder.feed(all.subspan(i, std::min(piece, bytes.size() - i)))) << "feed throws nothing";
  }
  try {
    out.tensors = decoder.finish();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << e.what();
    out.error = e.what();
  }
  return out;
}

// from_safetensors(bytes, source, metadata), after checking that SafetensorsDecoder, fed the
// same bytes in pieces of 1, 3, 8 and 4096 bytes, gives the same tensors and metadata, or
// refuses them with the same DataLoss: every case below runs through both readers.
NamedTensors parse_both(const std::vector<std::byte>& bytes, const std::string& source,
                        TensorMetadata* metadata = nullptr) {
  Decoded expected;
  try {
    expected.tensors = from_safetensors(bytes, source, &expected.metadata);
  } catch (const Error& e) {
    expected.error = e.what();
  }
  for (std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{8}, std::size_t{4096}}) {
    const Decoded got = decode_in_pieces(bytes, bytes.size(), piece, source);
    EXPECT_EQ(got.error, expected.error) << "pieces of " << piece;
    EXPECT_EQ(got.metadata, expected.metadata) << "pieces of " << piece;
    EXPECT_EQ(got.tensors.size(), expected.tensors.size()) << "pieces of " << piece;
    for (const auto& [name, t] : expected.tensors) {
      if (!got.tensors.count(name)) {
        ADD_FAILURE() << "pieces of " << piece << ": no tensor " << name;
        continue;
      }
      EXPECT_EQ(got.tensors.at(name).dtype, t.dtype) << name;
      EXPECT_EQ(got.tensors.at(name).shape, t.shape) << name;
      EXPECT_EQ(got.tensors.at(name).data, t.data) << name;
    }
  }
  return from_safetensors(bytes, source, metadata);
}

TEST(SafetensorsDecoder, PiecesGiveWhatTheWholeBufferGives) {
  NamedTensors tensors;
  tensors["f32"] = Tensor::from<float>(DType::kF32, {2, 3}, {0.0f, -0.0f, 1.5f, -2.25f, 3.0f, 1e30f});
  tensors["i64"] = Tensor::from<std::int64_t>(DType::kI64, {3}, {-1, 0, std::numeric_limits<std::int64_t>::max()});
  tensors["u8"] = Tensor::from<std::uint8_t>(DType::kU8, {5}, {1, 2, 3, 4, 5});
  tensors["empty"] = Tensor::from<float>(DType::kF32, {0, 4}, {});
  tensors["scalar"] = Tensor::from<double>(DType::kF64, {}, {0.1});
  const auto bytes = to_safetensors(tensors, {{"writer", "tensorhub"}});
  TensorMetadata metadata;
  const auto back = parse_both(bytes, kSource, &metadata);
  EXPECT_EQ(metadata, (TensorMetadata{{"writer", "tensorhub"}}));
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) EXPECT_EQ(back.at(name).data, t.data) << name;
}

TEST(SafetensorsDecoder, FewerOrMoreBytesThanAnnouncedAreDataLossAtFinish) {
  const auto ok = make_buffer(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight_bytes());
  // The last data byte does not arrive: truncated.
  const std::vector<std::byte> all_but_one(ok.begin(), ok.end() - 1);
  const Decoded short_by_one = decode_in_pieces(all_but_one, ok.size(), 5, kSource);
  EXPECT_NE(short_by_one.error.find("truncated: " + std::to_string(ok.size() - 1) + " of its " +
                                    std::to_string(ok.size()) + " bytes"),
            std::string::npos)
      << short_by_one.error;
  EXPECT_NE(short_by_one.error.find(kSource), std::string::npos) << short_by_one.error;
  // Half the bytes, the header not even complete.
  const std::vector<std::byte> half(ok.begin(), ok.begin() + 20);
  EXPECT_NE(decode_in_pieces(half, ok.size(), 7, kSource).error.find("truncated"), std::string::npos);
  // One byte more than the size announced (and than the tensors hold).
  auto longer = ok;
  longer.push_back(std::byte{0});
  const Decoded too_long = decode_in_pieces(longer, ok.size(), 4, kSource);
  EXPECT_NE(too_long.error.find("more than the " + std::to_string(ok.size()) + " bytes"), std::string::npos)
      << too_long.error;
}


TEST(SafetensorsMalformed, ValidBaselineParses) {
  // The baseline the malformed cases below are derived from, so each case fails for its
  // own reason only.
  const auto ok = make_buffer(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight_bytes());
  EXPECT_EQ(parse_both(ok, kSource).at("a").as<float>()[1], -2.0f);
}

TEST(SafetensorsMalformed, TruncatedBeforeHeaderLength) {
  for (std::size_t n : {0, 1, 7}) {
    std::vector<std::byte> buf(n, std::byte{0});
    expect_data_loss([&] { parse_both(buf, kSource); }, kSource, "length " + std::to_string(n));
  }
}

TEST(SafetensorsMalformed, TruncatedData) {
  auto buf = make_buffer(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight_bytes());
  buf.pop_back();
  expect_data_loss([&] { parse_both(buf, kSource); }, kSource, "one data byte missing");
}

TEST(SafetensorsMalformed, HeaderLengthPastEnd) {
  std::vector<std::byte> buf;
  append_le64(buf, 1000);
  const auto h = bytes_of(R"({"a":1})");
  buf.insert(buf.end(), h.begin(), h.end());
  expect_data_loss([&] { parse_both(buf, kSource); }, kSource, "header length 1000 of 7");
}

TEST(SafetensorsMalformed, HugeHeaderLength) {
  for (std::uint64_t len : {std::uint64_t{1} << 40, std::numeric_limits<std::uint64_t>::max(),
                            std::uint64_t{100'000'001}}) {
    std::vector<std::byte> buf;
    append_le64(buf, len);
    buf.resize(64, std::byte{' '});
    expect_data_loss([&] { parse_both(buf, kSource); }, kSource, "header length " + std::to_string(len));
  }
}

// Tensor "a" over eight data bytes with offsets out of range, then with sizes that do not match
// its shape and dtype.
TEST(SafetensorsMalformed, OffsetsOutOfRangeOrSizeNotMatchingTheShape) {
  const std::vector<std::array<const char*, 3>> cases = {  // dtype, shape, data_offsets
      {"F32", "[2]", "[0,16]"}, {"F32", "[2]", "[8,16]"}, {"F32", "[0]", "[9,9]"}, {"F32", "[2]", "[8,0]"},
      {"F32", "[2]", "[-8,0]"}, {"F32", "[2]", "[0,18446744073709551615]"}, {"F32", "[2]", "[0]"},
      {"F32", "[2]", R"([0,"8"])"},
      {"F32", "[3]", "[0,8]"}, {"F32", "[1]", "[0,8]"}, {"F64", "[2]", "[0,8]"}, {"U8", "[2,2]", "[0,8]"},
      {"F32", "[-2]", "[0,8]"}, {"F32", "[2.0]", "[0,8]"}, {"U8", "[4294967296,4294967296,4294967296]", "[0,8]"}};
  for (const auto& [dtype, shape, offsets] : cases) {
    const std::string h = std::string(R"({"a":{"dtype":")") + dtype + R"(","shape":)" + shape +
                          R"(,"data_offsets":)" + offsets + "}}";
    expect_data_loss([&] { parse_both(make_buffer(h, eight_bytes()), kSource); }, kSource, h);
  }
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  // Two tensors claiming the same bytes: the reference implementation rejects this
  // (InvalidOffset); a reader must not hand out aliased data.
  const char* headers[] = {
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
  };
  for (const char* h : headers)
    expect_data_loss([&] { parse_both(make_buffer(h, eight_bytes()), kSource); }, kSource, h);
}

// Expects DataLoss naming kSource and every string of `names` (the tensors at fault).
void expect_refused(const std::string& header, const std::vector<std::byte>& data,
                    const std::vector<std::string>& names) {
  const std::string msg = expect_data_loss([&] { parse_both(make_buffer(header, data), kSource); },
                                           kSource, header);
  for (const auto& n : names)
    EXPECT_NE(msg.find("\"" + n + "\""), std::string::npos) << header << " -> " << msg;
}

std::vector<std::byte> zeros(std::size_t n) { return std::vector<std::byte>(n, std::byte{0}); }

TEST(SafetensorsMalformed, OverlapNamesBothTensors) {
  expect_refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 eight_bytes(), {"a", "b"});
  // An empty tensor inside another's bytes overlaps it too (the reference refuses it).
  expect_refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                 eight_bytes(), {"a", "e"});
}

TEST(SafetensorsMalformed, DuplicateTensorName) {
  // JSON parsers keep one of two equal keys silently; which one differs between readers, so
  // the file is refused. Here "a" claims [0,4] and [4,8]: either reading alone would also
  // leave 4 bytes in no tensor, so the duplicate must be what is reported.
  const std::string msg = expect_data_loss(
      [&] {
        parse_both(make_buffer(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                     eight_bytes()),
                         kSource);
      },
      kSource, "duplicate a");
  EXPECT_NE(msg.find("\"a\" is named twice"), std::string::npos) << msg;
  // Twice with the same entry is still two tensors of one name.
  expect_refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 eight_bytes(), {"a"});
  // A field twice in one tensor's entry, and a metadata key twice, are as ambiguous.
  expect_refused(R"({"a":{"dtype":"I32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight_bytes(),
                 {"dtype"});
  expect_refused(R"({"__metadata__":{"k":"1","k":"2"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 eight_bytes(), {"k"});
  expect_refused(R"({"__metadata__":{},"__metadata__":{},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 eight_bytes(), {"__metadata__"});
}

TEST(SafetensorsMalformed, BytesInNoTensor) {
  // A gap between two tensors: [4, 8) belongs to neither.
  expect_refused(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                 zeros(12), {"b"});
  // A gap at the start: the first tensor must begin at 0.
  expect_refused(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight_bytes(), {"a"});
  // Bytes after the last tensor.
  auto nine = eight_bytes();
  nine.push_back(std::byte{0x7f});
  expect_refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", nine, {"a"});
  // A header without tensors and a non-empty byte buffer.
  expect_refused(R"({"__metadata__":{"k":"v"}})", zeros(4), {});
  expect_refused("{}", zeros(1), {});
}

TEST(SafetensorsMalformed, ExactTilingInAnyHeaderOrderParses) {
  // The counterpart of the refusals above: tensors listed out of offset order, empty tensors
  // at the start, between two tensors and at the end, all tile the buffer and are accepted.
  std::vector<std::byte> data;
  append_hex(data, {0x00, 0x00, 0x80, 0x3f, 0x01, 0x02, 0x03, 0x04, 0x05});
  const auto t = parse_both(
      make_buffer(R"({"z":{"dtype":"U8","shape":[5],"data_offsets":[4,9]},)"
                  R"("e0":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                  R"("e1":{"dtype":"I64","shape":[3,0],"data_offsets":[4,4]},)"
                  R"("e2":{"dtype":"F64","shape":[0],"data_offsets":[9,9]},)"
                  R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                  data),
      kSource);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t.at("a").as<float>()[0], 1.0f);
  EXPECT_EQ(t.at("z").data.back(), std::byte{0x05});
  EXPECT_EQ(t.at("e1").shape, (std::vector<std::int64_t>{3, 0}));
  EXPECT_TRUE(t.at("e2").data.empty());
  // No tensors and no data is a valid (empty) file, as the reference writer writes it.
  std::vector<std::byte> empty;
  append_hex(empty, {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '});
  EXPECT_TRUE(parse_both(empty, kSource).empty());
  EXPECT_EQ(to_safetensors({}), empty);
}

TEST(SafetensorsMalformed, ManyTensorsClaimingOneBufferAreRefusedBeforeCopying) {
  // 2000 tensors all claiming the same 1 MiB: refused as an overlap (before any copy, which
  // would have needed 2 GB).
  std::string header = "{";
  for (int i = 0; i < 2000; ++i)
    header += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
              R"(":{"dtype":"U8","shape":[1048576],"data_offsets":[0,1048576]})";
  header += "}";
  expect_refused(header, zeros(1 << 20), {"t0"});
}

TEST(SafetensorsMalformed, MetadataIsCheckedWithoutAMetadataOutput) {
  expect_refused(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 eight_bytes(), {"k"});
}

TEST(SafetensorsMalformed, BadDtype) {
  const char* headers[] = {
      R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})",
      R"({"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})",
      R"({"a":{"dtype":"","shape":[2],"data_offsets":[0,8]}})",
      R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})",
      R"({"a":{"shape":[2],"data_offsets":[0,8]}})",
  };
  for (const char* h : headers)
    expect_data_loss([&] { parse_both(make_buffer(h, eight_bytes()), kSource); }, kSource, h);
}

TEST(SafetensorsMalformed, HeaderNotJsonObject) {
  const char* headers[] = {
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})",  // unterminated
      "not json at all",
      "[1, 2, 3]",
      "\"a string\"",
      "",
      R"({"a":[1,2]})",
      R"({"__metadata__":[1]})",
      R"({"__metadata__":{"k":1}})",
  };
  for (const char* h : headers) {
    expect_data_loss(
        [&] {
          TensorMetadata meta;
          parse_both(make_buffer(h, eight_bytes()), kSource, &meta);
        },
        kSource, h);
  }
}

TEST(SafetensorsMalformed, FileErrorsNameThePath) {
  TempDir dir;
  const auto path = dir / "cut.safetensors";
  NamedTensors tensors;
  tensors["w"] = Tensor::from<float>(DType::kF32, {4}, {1, 2, 3, 4});
  auto bytes = to_safetensors(tensors);
  bytes.resize(bytes.size() - 3);
  write_file_bytes(path, bytes);
  expect_data_loss([&] { read_safetensors(path); }, path.string(), "truncated file");
}

}  // namespace
}  // namespace tensorhub
