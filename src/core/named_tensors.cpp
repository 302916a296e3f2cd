#include "tensorhub/core/named_tensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4}, {DType::kF64, "F64", 8}, {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4}, {DType::kU8, "U8", 1},   {DType::kI8, "I8", 1},
    {DType::kBool, "BOOL", 1},
};

// The safetensors reference implementation refuses headers above 100 MB; so do we, so a
// corrupt length field cannot make us allocate gigabytes.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

constexpr const char* kMetadataKey = "__metadata__";

// Parses the header text, also finding the first key that occurs twice in one object (a JSON
// parser keeps one of them silently, so another reader could see a different tensor).
// Returns a discarded value for invalid JSON; `duplicate` is then meaningless.
nlohmann::json parse_header(const char* text, std::size_t size, std::string& duplicate,
                            bool& duplicate_at_top) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == E::key && !open_objects.empty() && duplicate.empty() &&
               !open_objects.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
      duplicate_at_top = open_objects.size() == 1;
    }
    return true;
  };
  return nlohmann::json::parse(text, text + size, callback, /*allow_exceptions=*/false);
}

// One tensor's place in the byte buffer.
struct Extent {
  std::uint64_t begin, end;
  std::string name;
  bool operator<(const Extent& o) const {
    return std::tie(begin, end, name) < std::tie(o.begin, o.end, o.name);
  }
};

std::string range_text(const Extent& e) {
  return "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
}

// The reference implementation's rule: ordered by offset, the tensors tile the byte buffer
// exactly, from 0 to its end, with no overlap and no gap. Returns the violation, or "".
std::string check_tiling(std::vector<Extent> extents, std::uint64_t buffer_len) {
  std::sort(extents.begin(), extents.end());
  std::uint64_t expected = 0;
  const Extent* previous = nullptr;
  for (const Extent& e : extents) {
    if (e.begin < expected)
      return "tensor \"" + e.name + "\": data_offsets " + range_text(e) + " overlap tensor \"" +
             previous->name + "\" " + range_text(*previous) + "; tensors must not share bytes";
    if (e.begin > expected)
      return "tensor \"" + e.name + "\": data_offsets " + range_text(e) + " leave bytes [" +
             std::to_string(expected) + ", " + std::to_string(e.begin) +
             ") before it in no tensor; the tensors must cover the byte buffer without gaps";
    expected = e.end;
    previous = &e;
  }
  if (expected != buffer_len)
    return std::to_string(buffer_len - expected) + " bytes after " +
           (previous ? "the last tensor, \"" + previous->name + "\" " + range_text(*previous) + ","
                     : "the header, which lists no tensor,") +
           " belong to no tensor (the byte buffer has " + std::to_string(buffer_len) +
           " bytes); a file must end with its last tensor";
  return {};
}

std::uint64_t read_le64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

void write_le64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

// numel of a shape, or -1 when it overflows or has a negative dimension.
std::int64_t checked_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

std::string shape_to_string(std::span<const std::int64_t> shape, std::string_view separator) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += separator;
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string dtype_name(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.name;
  throw Internal("dtype_name: unknown dtype");
}

DType dtype_from_name(const std::string& name) {
  for (const auto& info : kDTypes)
    if (name == info.name) return info.dtype;
  throw InvalidArgument("unknown dtype \"" + name +
                        "\"; allowed: F32, F64, I64, I32, U8, I8, BOOL");
}

std::size_t dtype_size(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.size;
  throw Internal("dtype_size: unknown dtype");
}

std::int64_t Tensor::numel() const { return checked_numel(shape); }

namespace {

// The safetensors header (length prefix included) for `tensors`, after checking each.
std::string safetensors_header(const NamedTensorViews& tensors, const TensorMetadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    // Every reader takes this key for the metadata map: such a tensor would be lost (or the
    // file refused) on reading.
    if (name == kMetadataKey)
      throw InvalidArgument("a tensor may not be named \"__metadata__\": safetensors reserves that "
                            "header key for the metadata map; rename the tensor");
    const std::int64_t n = checked_numel(t.shape);
    if (n < 0 || static_cast<std::uint64_t>(n) * dtype_size(t.dtype) != t.data.size()) {
      throw InvalidArgument("tensor \"" + name + "\": " + std::to_string(t.data.size()) +
                            " bytes do not match its shape and dtype " + dtype_name(t.dtype));
    }
    header[name] = {{"dtype", dtype_name(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  // Pad the header with spaces to a multiple of 8 so the data is 8-byte aligned, as the
  // reference writer does.
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  write_le64(reinterpret_cast<std::byte*>(out.data()), text.size());
  return out + text;
}

}  // namespace

NamedTensorViews views_of(const NamedTensors& tensors) {
  NamedTensorViews views;
  for (const auto& [name, t] : tensors) views.emplace(name, TensorView{t.dtype, t.shape, t.data});
  return views;
}

std::uint64_t write_safetensors_to(const NamedTensors& tensors, const ByteSink& sink,
                                   const TensorMetadata& metadata) {
  return write_safetensors_to(views_of(tensors), sink, metadata);
}

std::uint64_t write_safetensors_to(const NamedTensorViews& tensors, const ByteSink& sink,
                                   const TensorMetadata& metadata) {
  const std::string header = safetensors_header(tensors, metadata);
  sink({reinterpret_cast<const std::byte*>(header.data()), header.size()});
  std::uint64_t total = header.size();
  for (const auto& [name, t] : tensors) {
    if (!t.data.empty()) sink(t.data);
    total += t.data.size();
  }
  return total;
}

std::vector<std::byte> to_safetensors(const NamedTensors& tensors,
                                      const TensorMetadata& metadata) {
  std::vector<std::byte> out;
  write_safetensors_to(tensors, [&](std::span<const std::byte> bytes) {
    if (out.empty()) {
      std::uint64_t data = 0;
      for (const auto& [name, t] : tensors) data += t.data.size();
      out.reserve(bytes.size() + data);  // the header comes first: one allocation
    }
    out.insert(out.end(), bytes.begin(), bytes.end());
  }, metadata);
  return out;
}

namespace {

Error safetensors_error(const std::string& source, const std::string& why) {
  return DataLoss("safetensors " + source + ": " + why);
}

// The header length a buffer of `size` bytes announces in its first 8 bytes `prefix`,
// checked against the limit and the buffer's size. REQUIRES: size >= 8.
std::uint64_t checked_header_len(const std::byte* prefix, std::uint64_t size, const std::string& source) {
  const std::uint64_t header_len = read_le64(prefix);
  if (header_len > kMaxHeaderBytes)
    throw safetensors_error(source, "header length " + std::to_string(header_len) + " exceeds the 100 MB limit");
  if (header_len > size - 8)
    throw safetensors_error(source, "truncated: header of " + std::to_string(header_len) +
                                        " bytes runs past the end of the buffer");
  return header_len;
}

// What a header describes: the tensors (shapes and dtypes, no data yet) and their extents in
// the byte buffer, ordered by offset.
struct Layout {
  NamedTensors tensors;
  std::vector<Extent> extents;
};

// One tensor entry of the header, checked against a byte buffer of `buffer_len` bytes.
Tensor layout_entry(const nlohmann::json& entry, const std::string& name, std::uint64_t buffer_len,
                    Extent& extent, const std::string& source) {
  const std::string where = "tensor \"" + name + "\": ";
  auto fail = [&](const std::string& why) { return safetensors_error(source, where + why); };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets") ||
      !entry["dtype"].is_string() || !entry["shape"].is_array() || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2) {
    throw fail("needs dtype, shape and data_offsets [begin, end]");
  }
  Tensor t;
  try {
    t.dtype = dtype_from_name(entry["dtype"].get<std::string>());
  } catch (const Error& e) {
    throw fail(e.message());
  }
  for (const auto& d : entry["shape"]) {
    if (!d.is_number_unsigned()) throw fail("shape entries must be non-negative integers");
    t.shape.push_back(d.get<std::int64_t>());
  }
  const auto& offs = entry["data_offsets"];
  if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
    throw fail("data_offsets must be non-negative integers");
  const std::uint64_t begin = offs[0].get<std::uint64_t>();
  const std::uint64_t end = offs[1].get<std::uint64_t>();
  if (begin > end || end > buffer_len)
    throw fail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] lie outside the " +
               std::to_string(buffer_len) + "-byte buffer (truncated?)");
  const std::int64_t n = t.numel();
  if (n < 0 || static_cast<std::uint64_t>(n) > (end - begin) / dtype_size(t.dtype) ||
      static_cast<std::uint64_t>(n) * dtype_size(t.dtype) != end - begin)
    throw fail("shape and dtype need a different byte count than data_offsets give");
  extent = {begin, end, name};
  return t;
}

// Parses and checks the header `text` (`header_len` bytes) of a buffer whose byte buffer has
// `buffer_len` bytes: every rule from_safetensors lists. Throws DataLoss naming `source`.
Layout parse_layout(const char* text, std::uint64_t header_len, std::uint64_t buffer_len, const std::string& source,
                    TensorMetadata* metadata) {
  std::string duplicate;
  bool duplicate_at_top = false;
  nlohmann::json header = parse_header(text, header_len, duplicate, duplicate_at_top);
  if (header.is_discarded() || !header.is_object()) throw safetensors_error(source, "header is not a JSON object");
  if (!duplicate.empty())
    throw safetensors_error(source, duplicate_at_top && duplicate != kMetadataKey
                                        ? "tensor \"" + duplicate + "\" is named twice in the header"
                                        : "key \"" + duplicate + "\" occurs twice in one object of the header");
  Layout layout;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const auto& entry = it.value();
    if (it.key() == kMetadataKey) {
      if (!entry.is_object()) throw safetensors_error(source, "__metadata__ is not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string())
          throw safetensors_error(source, "__metadata__ value of \"" + m.key() + "\" is not a string");
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    Extent extent;
    layout.tensors.emplace(it.key(), layout_entry(entry, it.key(), buffer_len, extent, source));
    layout.extents.push_back(std::move(extent));
  }
  // Copies are made only once the tensors are known to tile the buffer: then they add up to
  // the buffer's size, however many tensors claim its bytes.
  if (const std::string why = check_tiling(layout.extents, buffer_len); !why.empty())
    throw safetensors_error(source, why);
  std::sort(layout.extents.begin(), layout.extents.end());
  return layout;
}

}  // namespace

NamedTensors from_safetensors(const std::vector<std::byte>& bytes, const std::string& source,
                              TensorMetadata* metadata) {
  if (bytes.size() < 8)
    throw safetensors_error(source, "truncated: " + std::to_string(bytes.size()) +
                                        " bytes, shorter than the 8-byte header length");
  const std::uint64_t header_len = checked_header_len(bytes.data(), bytes.size(), source);
  const std::byte* buffer = bytes.data() + 8 + header_len;
  Layout layout = parse_layout(reinterpret_cast<const char*>(bytes.data() + 8), header_len,
                               bytes.size() - 8 - header_len, source, metadata);
  for (const Extent& e : layout.extents) layout.tensors.at(e.name).data.assign(buffer + e.begin, buffer + e.end);
  return std::move(layout.tensors);
}

// The decoder's progress: the header's bytes until they are complete, then the tensors,
// filled in offset order (the extents tile the byte buffer, so each byte has one place).
struct SafetensorsDecoder::State {
  std::uint64_t size = 0, received = 0;
  std::string source;
  TensorMetadata* metadata = nullptr;
  std::vector<std::byte> head;                 // the 8-byte length, then the header text
  std::optional<std::uint64_t> header_len;     // once the first 8 bytes are in
  std::optional<Layout> layout;                // once the header is complete
  // The tensors' buffers in offset order, each with the size it is to reach.
  std::vector<std::pair<std::vector<std::byte>*, std::size_t>> order;
  std::size_t next = 0;                        // the buffer being filled
  std::exception_ptr error;                    // the first DataLoss, thrown by finish()

  // Takes header bytes from the front of `bytes`; parses the header once it is complete.
  void take_header(std::span<const std::byte>& bytes) {
    while (!bytes.empty() && (!header_len || head.size() < 8 + *header_len)) {
      const std::size_t want = static_cast<std::size_t>(header_len ? 8 + *header_len : 8) - head.size();
      const std::size_t n = std::min(want, bytes.size());
      head.insert(head.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      bytes = bytes.subspan(n);
      if (!header_len && head.size() == 8) {
        header_len = checked_header_len(head.data(), size, source);
        head.reserve(8 + static_cast<std::size_t>(*header_len));
      }
    }
    if (!header_len || head.size() != 8 + *header_len) return;
    layout = parse_layout(reinterpret_cast<const char*>(head.data() + 8), *header_len, size - 8 - *header_len, source,
                          metadata);
    for (const Extent& e : layout->extents) {
      auto& data = layout->tensors.at(e.name).data;
      const auto bytes_of_tensor = static_cast<std::size_t>(e.end - e.begin);
      data.reserve(bytes_of_tensor);  // appends below never reallocate, nor zero the memory first
      order.emplace_back(&data, bytes_of_tensor);
    }
    head = {};
  }

  // Appends data bytes to the tensors they belong to, in offset order.
  void take_data(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      while (next < order.size() && order[next].first->size() == order[next].second) ++next;
      if (next == order.size()) throw safetensors_error(source, "more bytes than its tensors hold");
      std::vector<std::byte>& data = *order[next].first;
      const std::size_t n = std::min(bytes.size(), order[next].second - data.size());
      data.insert(data.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      bytes = bytes.subspan(n);
    }
  }
};

SafetensorsDecoder::SafetensorsDecoder(std::uint64_t size, std::string source, TensorMetadata* metadata)
    : state_(std::make_unique<State>()) {
  state_->size = size;
  state_->source = std::move(source);
  state_->metadata = metadata;
}

SafetensorsDecoder::~SafetensorsDecoder() = default;

void SafetensorsDecoder::feed(std::span<const std::byte> bytes) {
  State& s = *state_;
  if (s.error) return;
  try {
    s.received += bytes.size();
    if (s.received > s.size)
      throw safetensors_error(s.source, "more than the " + std::to_string(s.size) + " bytes announced");
    if (!s.layout && s.size >= 8) s.take_header(bytes);
    if (s.layout) s.take_data(bytes);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kDataLoss) throw;
    s.error = std::current_exception();
  }
}

NamedTensors SafetensorsDecoder::finish() {
  State& s = *state_;
  if (s.error) std::rethrow_exception(s.error);
  if (s.size < 8)
    throw safetensors_error(s.source, "truncated: " + std::to_string(s.size) +
                                          " bytes, shorter than the 8-byte header length");
  if (s.received != s.size || !s.layout)
    throw safetensors_error(s.source, "truncated: " + std::to_string(s.received) + " of its " +
                                          std::to_string(s.size) + " bytes arrived");
  return std::move(s.layout->tensors);
}

std::vector<std::byte> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Unavailable("cannot open " + path.string() + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(in.tellg());
  in.seekg(0);
  std::vector<std::byte> bytes(size);
  if (size && !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    throw Unavailable("cannot read " + path.string() + ": " + std::strerror(errno));
  return bytes;
}

void write_file_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Unavailable("cannot rename " + tmp + " to " + path.string() + ": " + ec.message());
}

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const TensorMetadata& metadata) {
  std::vector<std::byte> bytes;
  try {
    bytes = to_safetensors(tensors, metadata);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    throw InvalidArgument("cannot write " + path.string() + ": " + e.message());
  }
  write_file_bytes(path, bytes);
}

NamedTensors read_safetensors(const std::filesystem::path& path, TensorMetadata* metadata) {
  return from_safetensors(read_file_bytes(path), path.string(), metadata);
}

}  // namespace tensorhub
