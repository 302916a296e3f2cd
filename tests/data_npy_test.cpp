// numpy's .npy and .npz files (data/npy.h) from bytes built here as NEP 1 and the ZIP
// format describe them; process_save_fetch_test.cpp reads files numpy itself wrote.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "tensorhub/data/npy.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using testing::error_message_of;

std::vector<std::byte> bytes_of(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// A version 1.0 .npy file: magic, version, 2-byte header length, header padded to 64 bytes.
std::string npy(const std::string& header_dict, const std::string& data) {
  std::string header = header_dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

std::string le32(std::uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}
std::string le16(std::uint16_t v) { return le32(v).substr(0, 2); }

// A ZIP archive of one stored entry (APPNOTE 4.3.7, 4.3.12, 4.3.16).
std::string stored_zip(const std::string& name, const std::string& data) {
  const auto crc = static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
  const std::string sizes = le32(crc) + le32(data.size()) + le32(data.size());
  const std::string local = le32(0x04034b50) + le16(20) + le16(0) + le16(0) + le32(0) + sizes + le16(name.size()) +
                            le16(0) + name + data;
  const std::string central = le32(0x02014b50) + le16(20) + le16(20) + le16(0) + le16(0) + le32(0) + sizes +
                              le16(name.size()) + le16(0) + le16(0) + le16(0) + le16(0) + le32(0) + le32(0) + name;
  const std::string end = le32(0x06054b50) + le16(0) + le16(0) + le16(1) + le16(1) + le32(central.size()) +
                          le32(local.size()) + le16(0);
  return local + central + end;
}

TEST(NpyTest, ReadsAFloatArrayAndRefusesTruncatedOrMalformedFiles) {
  float values[] = {1.5f, -2.0f, 3.25f};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  const Tensor t = parse_npy(bytes_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data)), "a.npy");
  EXPECT_EQ(t.dtype, DType::kF32);
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(std::vector<float>(t.as<float>(), t.as<float>() + 3), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  const Tensor scalar = parse_npy(bytes_of(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                                               std::string("\x07\0\0\0\0\0\0\0", 8))), "s.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(*scalar.as<std::int64_t>(), 7);

  auto message = error_message_of(ErrorKind::kDataLoss, [&] {
    parse_npy(bytes_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data.substr(0, 8))), "a.npy");
  }, "truncated");
  EXPECT_EQ(message, "a.npy: the .npy array of shape [3] and dtype <f4 needs 12 data bytes, the file has 8 (truncated)");
  message = error_message_of(ErrorKind::kDataLoss, [&] { parse_npy(bytes_of("PK\x03\x04 and more"), "b.npy"); }, "magic");
  EXPECT_EQ(message, "b.npy is not a .npy file (no \\x93NUMPY magic at its start)");
  error_message_of(ErrorKind::kDataLoss, [&] {
    parse_npy(bytes_of(npy("{'descr': '<f4', 'shape': (3,), }", data)), "c.npy");
  }, "no fortran_order");
  error_message_of(ErrorKind::kDataLoss, [&] {
    parse_npy(bytes_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, -1), }", data)), "d.npy");
  }, "negative dimension");
}

TEST(NpyTest, RefusesObjectStructuredAndUnsupportedDtypesNamingThem) {
  auto message = error_message_of(ErrorKind::kInvalidArgument, [&] {
    parse_npy(bytes_of(npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "\x80\x04pickle")), "o.npy");
  }, "object");
  EXPECT_NE(message.find("o.npy is an object array (dtype |O), which numpy stores with pickle; tensorhub never "
                         "unpickles (allow_pickle is not honoured)"), std::string::npos) << message;
  message = error_message_of(ErrorKind::kInvalidArgument, [&] {
    parse_npy(bytes_of(npy("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }",
                           std::string(8, '\0'))), "s.npy");
  }, "structured");
  EXPECT_NE(message.find("structured array"), std::string::npos) << message;
  message = error_message_of(ErrorKind::kInvalidArgument, [&] {
    parse_npy(bytes_of(npy("{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'))), "u.npy");
  }, "uint32");
  EXPECT_NE(message.find("u.npy has dtype <u4, which a hub dataset cannot hold"), std::string::npos) << message;
}

TEST(NpzTest, ReadsAStoredEntryAndChecksItsCrc) {
  const std::string array = npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2), }", "\x01\x02\x03\x04");
  std::string zip = stored_zip("pixels.npy", array);
  const NamedTensors t = parse_npz(bytes_of(zip), "x.npz");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t.at("pixels").shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(t.at("pixels").data[3], std::byte{4});

  zip[zip.find("\x01\x02\x03\x04")] = '\x09';  // one data byte changed
  auto message = error_message_of(ErrorKind::kDataLoss, [&] { parse_npz(bytes_of(zip), "x.npz"); }, "crc");
  EXPECT_EQ(message, "x.npz: entry pixels.npy fails its CRC-32 check (corrupt)");
  message = error_message_of(ErrorKind::kDataLoss, [&] { parse_npz(bytes_of(zip.substr(0, 40)), "x.npz"); }, "cut");
  EXPECT_EQ(message, "x.npz: not a ZIP archive, or truncated (no end of central directory record)");
  message = error_message_of(ErrorKind::kInvalidArgument, [&] {
    parse_npz(bytes_of(stored_zip("notes.txt", "hello")), "y.npz");
  }, "not npy");
  EXPECT_EQ(message, "y.npz: entry \"notes.txt\" is not an array NAME.npy, as numpy.savez writes");
}

}  // namespace
}  // namespace tensorhub
