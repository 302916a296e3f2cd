// MNIST IDX reader. Format: Yann LeCun's MNIST page, "FILE FORMATS FOR THE MNIST DATABASE".
//
// Safety: nothing is allocated from a header field before it is checked. For a plain file the
// declared data size must equal the bytes the file actually holds (fstat). For a gzip file the
// uncompressed length is unknown up front, so the data is read in bounded chunks and the buffer
// grows only with bytes that really arrived; a short stream is DataLoss.
#include "tensorhub/data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"

namespace tensorhub {
namespace {

// Type codes of the IDX format and what they mean; only 0x08 is supported.
std::string type_code_name(std::uint8_t code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return "unknown";
  }
}

std::string hex(std::uint32_t v, int digits) {
  static const char* kDigits = "0123456789abcdef";
  std::string s = "0x";
  for (int i = digits - 1; i >= 0; --i) s += kDigits[(v >> (4 * i)) & 0xf];
  return s;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Closes a POSIX file descriptor unless ownership was handed on (to gzdopen).
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

// A byte source over either a plain file or a gzip stream. read() returns the number of bytes
// read (fewer only at end of input) and throws on I/O or decompression errors.
class Source {
 public:
  Source(const std::filesystem::path& path) : path_(path.string()) {
    fd_.fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_.fd < 0) throw Unavailable("cannot open IDX file " + path_ + ": " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_.fd, &st) != 0)
      throw Unavailable("cannot stat IDX file " + path_ + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Unavailable("IDX file " + path_ + " is not a regular file");
    file_size_ = static_cast<std::uint64_t>(st.st_size);
    // gzip streams start with 1f 8b (RFC 1952); a valid IDX file starts with two zero bytes,
    // so sniffing cannot mistake one for the other.
    std::array<std::uint8_t, 2> magic{};
    const auto n = ::pread(fd_.fd, magic.data(), magic.size(), 0);
    if (n < 0) throw Unavailable("cannot read IDX file " + path_ + ": " + std::strerror(errno));
    if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
      gz_ = gzdopen(fd_.fd, "rb");
      if (!gz_) throw Unavailable("cannot open gzip stream of " + path_ + ": out of memory");
      fd_.release();
      gzbuffer(gz_, 1 << 17);
    }
  }
  ~Source() {
    if (gz_) gzclose(gz_);
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  bool compressed() const { return gz_ != nullptr; }
  std::uint64_t file_size() const { return file_size_; }
  const std::string& name() const { return path_; }

  std::size_t read(void* buf, std::size_t len) {
    auto* out = static_cast<std::uint8_t*>(buf);
    std::size_t done = 0;
    while (done < len) {
      const std::size_t want = std::min<std::size_t>(len - done, 1u << 30);
      if (gz_) {
        const int n = gzread(gz_, out + done, static_cast<unsigned>(want));
        if (n < 0) {
          int errnum = 0;
          const char* msg = gzerror(gz_, &errnum);
          if (errnum == Z_ERRNO)
            throw Unavailable("cannot read IDX file " + path_ + ": " + std::strerror(errno));
          throw DataLoss("IDX file " + path_ + " is a truncated or corrupt gzip stream: " +
                         (msg ? msg : "unknown zlib error"));
        }
        if (n == 0) {
          // gzread reports a stream cut short as end of input plus a Z_BUF_ERROR.
          int errnum = 0;
          const char* msg = gzerror(gz_, &errnum);
          if (errnum != Z_OK && errnum != Z_STREAM_END)
            throw DataLoss("IDX file " + path_ + " is a truncated or corrupt gzip stream: " +
                           (msg ? msg : "unknown zlib error"));
          break;
        }
        done += static_cast<std::size_t>(n);
      } else {
        const auto n = ::read(fd_.fd, out + done, want);
        if (n < 0) {
          if (errno == EINTR) continue;
          throw Unavailable("cannot read IDX file " + path_ + ": " + std::strerror(errno));
        }
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
      }
    }
    return done;
  }

 private:
  std::string path_;
  Fd fd_;
  gzFile gz_ = nullptr;
  std::uint64_t file_size_ = 0;
};

// Finds "<dir>/<stem>" or "<dir>/<stem>.gz", the plain file first (as the PyTorch peer does).
std::filesystem::path find_idx(const std::filesystem::path& dir, const std::string& stem) {
  for (const auto& name : {stem, stem + ".gz"}) {
    std::error_code ec;
    const auto p = dir / name;
    if (std::filesystem::exists(p, ec)) return p;
  }
  throw Unavailable("cannot find " + (dir / stem).string() + " or " + (dir / stem).string() +
                    ".gz; is dataset-fashion-mnist installed, or is the directory right?");
}

// Reads the magic number and the dimensions: an empty U8 tensor of the declared shape, with
// the product of its dimensions in *numel.
Tensor read_header(Source& src, std::uint64_t* numel) {
  const std::string& name = src.name();
  std::array<std::uint8_t, 4> magic{};
  if (src.read(magic.data(), 4) != 4)
    throw DataLoss("IDX file " + name + " is truncated: it ends inside the 4-byte magic number");
  const std::uint32_t magic_value = be32(magic.data());
  if (magic[0] != 0 || magic[1] != 0)
    throw DataLoss("IDX file " + name + " has a wrong magic number " + hex(magic_value, 8) +
                   "; an IDX file starts with two zero bytes, a type code and a rank "
                   "(e.g. 0x00000803 for images, 0x00000801 for labels)");
  if (magic[2] != 0x08)
    throw DataLoss("IDX file " + name + " has unsupported type code " + hex(magic[2], 2) + " (" +
                   type_code_name(magic[2]) + "); only 0x08 (unsigned byte) is supported");
  const int rank = magic[3];
  if (rank == 0)
    throw DataLoss("IDX file " + name + " has rank 0 in its magic number " + hex(magic_value, 8) +
                   "; expected at least one dimension");

  std::vector<std::uint8_t> dims_raw(4 * static_cast<std::size_t>(rank));
  if (src.read(dims_raw.data(), dims_raw.size()) != dims_raw.size())
    throw DataLoss("IDX file " + name + " is truncated: it ends inside the " +
                   std::to_string(rank) + " dimension sizes of its header");

  Tensor t;
  t.dtype = DType::kU8;
  t.shape.resize(rank);
  *numel = 1;
  bool overflow = false;
  for (int i = 0; i < rank; ++i) {
    const std::uint32_t d = be32(dims_raw.data() + 4 * i);
    t.shape[i] = d;
    if (__builtin_mul_overflow(*numel, std::uint64_t{d}, numel) ||
        *numel > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      overflow = true;
  }
  if (overflow)
    throw DataLoss("IDX file " + name + " declares dimensions " + shape_to_string(t.shape) +
                   " whose product overflows; the header is corrupt");
  return t;
}

// A plain file: the declared size must be exactly what is on disk after the header.
void read_plain_data(Source& src, Tensor& t, std::uint64_t numel) {
  const std::string& name = src.name();
  const std::uint64_t header_bytes = 4 + 4 * static_cast<std::uint64_t>(t.shape.size());
  const std::uint64_t available = src.file_size() > header_bytes ? src.file_size() - header_bytes : 0;
  if (numel > available)
    throw DataLoss("IDX file " + name + " is truncated: its header declares " + shape_to_string(t.shape) + " = " +
                   std::to_string(numel) + " data bytes but the file holds " + std::to_string(available));
  if (numel < available)
    throw DataLoss("IDX file " + name + " has " + std::to_string(available - numel) + " bytes after the " +
                   std::to_string(numel) + " data bytes its header " + shape_to_string(t.shape) +
                   " declares; the file is corrupt");
  t.data.resize(numel);
  const std::size_t got = src.read(t.data.data(), numel);
  if (got != numel)
    throw DataLoss("IDX file " + name + " is truncated: expected " + std::to_string(numel) +
                   " data bytes, read " + std::to_string(got) + " (file changed while reading?)");
}

// gzip: the buffer grows only with data that has arrived, in chunks of at most 16 MiB, and the
// stream must end where the data does.
void read_gzip_data(Source& src, Tensor& t, std::uint64_t numel) {
  const std::string& name = src.name();
  constexpr std::uint64_t kChunk = 16u << 20;
  std::uint64_t got = 0;
  t.data.reserve(static_cast<std::size_t>(std::min(numel, kChunk)));
  while (got < numel) {
    const std::uint64_t want = std::min(numel - got, kChunk);
    t.data.resize(static_cast<std::size_t>(got + want));
    const std::size_t n = src.read(t.data.data() + got, static_cast<std::size_t>(want));
    got += n;
    if (n < want)
      throw DataLoss("IDX file " + name + " is truncated: its header declares " + shape_to_string(t.shape) + " = " +
                     std::to_string(numel) + " data bytes but the gzip stream holds only " + std::to_string(got));
  }
  std::uint8_t extra = 0;
  if (src.read(&extra, 1) != 0)
    throw DataLoss("IDX file " + name + " has bytes after the " + std::to_string(numel) +
                   " data bytes its header " + shape_to_string(t.shape) + " declares; the file is corrupt");
}

}  // namespace

Tensor read_idx(const std::filesystem::path& path) {
  Source src(path);
  std::uint64_t numel = 0;
  Tensor t = read_header(src, &numel);
  if (src.compressed()) {
    read_gzip_data(src, t, numel);
  } else {
    read_plain_data(src, t, numel);
  }
  return t;
}

void check_idx_pair(const Tensor& images, const std::filesystem::path& images_path, const Tensor& labels,
                    const std::filesystem::path& labels_path) {
  if (images.shape.size() != 3)
    throw InvalidArgument("images file " + images_path.string() + " has shape " + shape_to_string(images.shape) +
                          "; expected [n, rows, cols] (magic 0x00000803)");
  if (labels.shape.size() != 1)
    throw InvalidArgument("labels file " + labels_path.string() + " has shape " + shape_to_string(labels.shape) +
                          "; expected [n] (magic 0x00000801)");
  if (images.shape[0] != labels.shape[0])
    throw InvalidArgument("images file " + images_path.string() + " holds " + std::to_string(images.shape[0]) +
                          " images but labels file " + labels_path.string() + " holds " +
                          std::to_string(labels.shape[0]) + " labels");
}

MnistSplits load_mnist_dataset(const std::filesystem::path& dir, std::int64_t n_train) {
  const auto images_path = find_idx(dir, "train-images-idx3-ubyte");
  const auto labels_path = find_idx(dir, "train-labels-idx1-ubyte");
  const auto test_images_path = find_idx(dir, "t10k-images-idx3-ubyte");
  const auto test_labels_path = find_idx(dir, "t10k-labels-idx1-ubyte");

  const Tensor images = read_idx(images_path);
  const Tensor labels = read_idx(labels_path);
  const Tensor test_images = read_idx(test_images_path);
  const Tensor test_labels = read_idx(test_labels_path);

  check_idx_pair(images, images_path, labels, labels_path);
  check_idx_pair(test_images, test_images_path, test_labels, test_labels_path);
  const std::int64_t n = images.shape[0];
  if (n_train < 0 || n_train > n)
    throw InvalidArgument("n_train " + std::to_string(n_train) + " is outside [0, " +
                          std::to_string(n) + "], the size of the training set in " +
                          images_path.string());

  // Rows of [n, rows * cols] floats in [0, 1]; x / 255 with a true division, as the PyTorch
  // reference does, so values match bit for bit.
  auto images_slice = [](const Tensor& x, std::int64_t begin, std::int64_t end) {
    const std::int64_t row = x.shape[1] * x.shape[2];
    Tensor out;
    out.dtype = DType::kF32;
    out.shape = {end - begin, row};
    out.data.resize(static_cast<std::size_t>((end - begin) * row) * sizeof(float));
    const std::uint8_t* src = reinterpret_cast<const std::uint8_t*>(x.data.data()) + begin * row;
    float* dst = out.as<float>();
    const std::int64_t count = (end - begin) * row;
    for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
    return out;
  };
  auto labels_slice = [](const Tensor& y, std::int64_t begin, std::int64_t end) {
    Tensor out;
    out.dtype = DType::kI64;
    out.shape = {end - begin};
    out.data.resize(static_cast<std::size_t>(end - begin) * sizeof(std::int64_t));
    const std::uint8_t* src = reinterpret_cast<const std::uint8_t*>(y.data.data()) + begin;
    std::int64_t* dst = out.as<std::int64_t>();
    for (std::int64_t i = 0; i < end - begin; ++i) dst[i] = src[i];
    return out;
  };

  MnistSplits s;
  s.X_train = images_slice(images, 0, n_train);
  s.y_train = labels_slice(labels, 0, n_train);
  s.X_val = images_slice(images, n_train, n);
  s.y_val = labels_slice(labels, n_train, n);
  s.X_test = images_slice(test_images, 0, test_images.shape[0]);
  s.y_test = labels_slice(test_labels, 0, test_labels.shape[0]);
  return s;
}

std::filesystem::path default_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

}  // namespace tensorhub
