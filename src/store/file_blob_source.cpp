#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tensorhub/core/error.h"
#include "tensorhub/store/backend.h"

namespace tensorhub {

namespace {
constexpr std::size_t kPieceBytes = 1 << 20;  // one stored chunk
}

FileBlobSource::FileBlobSource(std::filesystem::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_, ec)) throw NotFound("file " + path_.string() + " does not exist (or is not a file)");
  size_ = std::filesystem::file_size(path_, ec);
  if (ec) throw Unavailable("cannot read the size of " + path_.string() + ": " + ec.message());
}

void FileBlobSource::write(const std::function<void(std::span<const std::byte>)>& sink) const {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Unavailable("cannot open " + path_.string() + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::vector<std::byte> buffer(kPieceBytes);
  std::uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Unavailable("cannot read " + path_.string() + ": " + std::strerror(errno));
    if (n == 0) break;
    total += static_cast<std::uint64_t>(n);
    if (total > size_) break;
    sink(std::span(buffer).first(static_cast<std::size_t>(n)));
  }
  if (total != size_)
    throw DataLoss("file " + path_.string() + " changed while it was stored: " + std::to_string(size_) +
                   " bytes when opened, " + std::to_string(total) + " now");
}

}  // namespace tensorhub
