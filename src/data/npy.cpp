// .npy arrays (numpy's NEP 1 format); npz.cpp reads the ZIP archives that hold them.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/data/npy.h"

namespace tensorhub {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

// The header dict's values, as NEP 1 writes them.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

// A reader of the header's Python literal: {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), }. Only what numpy's writer emits (strings, True/False, tuples of ints);
// anything else is DataLoss, except a list for 'descr' (a structured dtype, refused by the caller).
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  NpyHeader parse() {
    NpyHeader h;
    bool descr = false, order = false, shape = false;
    expect('{');
    while (peek() != '}') {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") descr_value(h), descr = true;
      else if (key == "fortran_order") h.fortran_order = bool_literal(), order = true;
      else if (key == "shape") h.shape = int_tuple(), shape = true;
      else fail("an unknown key '" + key + "'");
      if (peek() != ',') break;
      ++i_;
    }
    expect('}');
    if (!descr || !order || !shape) fail("no 'descr', 'fortran_order' or 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw DataLoss(source_ + ": the .npy header has " + what + " (at byte " + std::to_string(i_) +
                   " of its text); it is not a numpy array file (NEP 1)");
  }
  char peek() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n')) ++i_;
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("no '") + c + "' where one belongs");
    ++i_;
  }
  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("a key or value that is not a string");
    const std::size_t end = s_.find(quote, i_ + 1);
    if (end == std::string_view::npos) fail("an unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  void descr_value(NpyHeader& h) {
    if (peek() == '[')
      throw InvalidArgument(source_ + " holds a structured array (fields of several dtypes), which a tensor "
                            "cannot be; save each field as an array of its own");
    h.descr = string_literal();
  }
  bool bool_literal() {
    peek();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (s_.substr(i_, std::strlen(word)) == word) {
        i_ += std::strlen(word);
        return value;
      }
    fail("a 'fortran_order' that is not True or False");
  }
  std::vector<std::int64_t> int_tuple() {
    std::vector<std::int64_t> out;
    expect('(');
    while (peek() != ')') {
      std::int64_t v = 0;
      bool digits = false;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("a dimension too large");
        v = v * 10 + (s_[i_++] - '0');
        digits = true;
      }
      if (!digits) fail("a 'shape' that is not a tuple of whole numbers");
      out.push_back(v);
      if (peek() != ',') break;
      ++i_;
    }
    expect(')');
    return out;
  }

  std::string_view s_;
  const std::string& source_;
  std::size_t i_ = 0;
};

// The tensor dtype of a numpy descr ('<f4', '|u1', '>i8', ...) and whether its bytes are
// big-endian. Throws InvalidArgument naming the dtype for what safetensors' dtypes cannot hold.
std::pair<DType, bool> dtype_of(const std::string& descr, const std::string& source) {
  if (descr.size() >= 2 && descr[1] == 'O')
    throw InvalidArgument(source + " is an object array (dtype " + descr + "), which numpy stores with pickle; "
                          "tensorhub never unpickles (allow_pickle is not honoured): save numbers, e.g. "
                          "np.asarray(x, dtype=np.float32)");
  static const std::pair<const char*, DType> kTypes[] = {{"f4", DType::kF32}, {"f8", DType::kF64},
                                                         {"i8", DType::kI64}, {"i4", DType::kI32},
                                                         {"u1", DType::kU8},  {"i1", DType::kI8},
                                                         {"b1", DType::kBool}};
  if (descr.size() == 3 && std::string("<>|=").find(descr[0]) != std::string::npos)
    for (const auto& [name, dtype] : kTypes)
      if (descr.substr(1) == name) return {dtype, descr[0] == '>'};
  throw InvalidArgument(source + " has dtype " + descr + ", which a hub dataset cannot hold; supported: float32, "
                        "float64, int64, int32, uint8, int8, bool (convert with e.g. x.astype(np.float32))");
}

// The element count of `shape`, or DataLoss when it overflows.
std::uint64_t element_count(const std::vector<std::int64_t>& shape, const std::string& source) {
  std::uint64_t n = 1;
  for (const auto d : shape) {
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / 16 / static_cast<std::uint64_t>(d))
      throw DataLoss(source + ": the .npy shape " + shape_to_string(shape) + " is too large to be real");
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

// Fortran-order (column-major) bytes of `shape` in C order (row-major).
std::vector<std::byte> to_c_order(std::span<const std::byte> data, const std::vector<std::int64_t>& shape,
                                  std::size_t item, std::uint64_t count) {
  std::vector<std::byte> out(data.size());
  const std::size_t ndim = shape.size();
  std::vector<std::uint64_t> fstride(ndim, item);  // bytes between neighbours along each axis
  for (std::size_t k = 1; k < ndim; ++k) fstride[k] = fstride[k - 1] * static_cast<std::uint64_t>(shape[k - 1]);
  std::vector<std::int64_t> index(ndim, 0);
  std::uint64_t from = 0;
  for (std::uint64_t n = 0; n < count; ++n) {
    std::memcpy(out.data() + n * item, data.data() + from, item);
    for (std::size_t k = ndim; k-- > 0;) {  // the next C-order index; the last axis moves fastest
      from += fstride[k];
      if (++index[k] < shape[k]) break;
      from -= fstride[k] * static_cast<std::uint64_t>(shape[k]);
      index[k] = 0;
    }
  }
  return out;
}

// The header's text and where the data begins (NEP 1: version 1.0 has a 2-byte length,
// 2.0 and 3.0 a 4-byte one). Throws DataLoss.
std::pair<std::string_view, std::size_t> header_text(std::span<const std::byte> bytes, const std::string& source) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagicSize + 4 || std::memcmp(p, kMagic, kMagicSize) != 0)
    throw DataLoss(source + " is not a .npy file (no \\x93NUMPY magic at its start)");
  const int major = p[6];
  if (major < 1 || major > 3)
    throw DataLoss(source + ": .npy format version " + std::to_string(major) + " is unknown (1, 2 and 3 are read)");
  const std::size_t len_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_size) throw DataLoss(source + ": the .npy file ends inside its header");
  std::uint64_t len = 0;
  for (std::size_t k = len_size; k-- > 0;) len = len << 8 | p[8 + k];
  const std::size_t start = 8 + len_size;
  if (len > bytes.size() - start) throw DataLoss(source + ": the .npy file ends inside its header");
  return {std::string_view(reinterpret_cast<const char*>(p) + start, len), start + len};
}

}  // namespace

Tensor parse_npy(std::span<const std::byte> bytes, const std::string& source) {
  const auto [text, data_start] = header_text(bytes, source);
  const NpyHeader h = HeaderParser(text, source).parse();
  const auto [dtype, big_endian] = dtype_of(h.descr, source);
  const std::size_t item = dtype_size(dtype);
  const std::uint64_t count = element_count(h.shape, source);
  const std::span<const std::byte> data = bytes.subspan(data_start);
  if (data.size() / item != count || data.size() % item != 0)
    throw DataLoss(source + ": the .npy array of shape " + shape_to_string(h.shape) + " and dtype " + h.descr +
                   " needs " + std::to_string(count * item) + " data bytes, the file has " +
                   std::to_string(data.size()) + (data.size() < count * item ? " (truncated)" : ""));
  Tensor t;
  t.dtype = dtype;
  t.shape = h.shape;
  t.data = h.fortran_order && h.shape.size() > 1 ? to_c_order(data, h.shape, item, count)
                                                  : std::vector<std::byte>(data.begin(), data.end());
  if (big_endian)
    for (std::size_t i = 0; i + item <= t.data.size(); i += item) std::reverse(&t.data[i], &t.data[i] + item);
  return t;
}

}  // namespace tensorhub
