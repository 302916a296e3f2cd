// Readers for MNIST's IDX file format, plain or gzip-compressed.
//
// Format source: Yann LeCun's MNIST page, "FILE FORMATS FOR THE MNIST DATABASE": a 4-byte
// big-endian magic number (two zero bytes, a type code 0x08 = unsigned byte, ..., and the
// number of dimensions), one big-endian 32-bit size per dimension, then the data in C order.
// Fashion-MNIST (Debian's dataset-fashion-mnist) uses the same files and names.
#pragma once

#include <filesystem>
#include <string>

#include "tensorhub/core/named_tensors.h"

namespace tensorhub {

/// Reads one IDX file (".gz" is decompressed with zlib). Only type code 0x08 (unsigned byte,
/// the type MNIST uses) is supported. Returns a U8 tensor with the file's dimensions, e.g.
/// [60000, 28, 28] for train images and [60000] for train labels.
/// Throws Unavailable if the file is missing or unreadable, and DataLoss if the magic number
/// is wrong or the file is shorter than its header says; each message names the file.
/// Also DataLoss: another type code, rank 0, bytes after the declared data, a corrupt gzip
/// stream. Compression is recognised by the gzip magic bytes (1f 8b), whatever the name.
/// Sizes are checked before allocating: against the file length for a plain file; a gzip
/// file is read in bounded chunks, so a lying header fails on the short stream.
Tensor read_idx(const std::filesystem::path& path);

/// Checks an MNIST pair read by read_idx: `images` (from images_path) must be [n, rows, cols]
/// and `labels` (from labels_path) [n], with the same n. Throws InvalidArgument naming the
/// file(s) and the shapes or counts found otherwise.
void check_idx_pair(const Tensor& images, const std::filesystem::path& images_path, const Tensor& labels,
                    const std::filesystem::path& labels_path);

/// The six tensors of the original TensorLayer example (tl.files.load_mnist_dataset with
/// shape (-1, 784)): X_* are F32 [n, 784] scaled to [0, 1], y_* are I64 [n].
struct MnistSplits {
  Tensor X_train, y_train, X_val, y_val, X_test, y_test;
};

/// Loads an MNIST-format directory (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
/// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]) and splits the training set into
/// the first `n_train` examples (train) and the rest (validation), as the original does
/// (50,000 / 10,000). Each file is taken plain if present, else with ".gz". Images must be
/// [n, rows, cols] (X_* are then [n, rows * cols], x / 255 in float) and labels [n].
/// Throws what read_idx throws (Unavailable naming the file if neither form exists), and
/// InvalidArgument if n_train is outside [0, n], shapes are not as above, or image and label
/// counts differ.
MnistSplits load_mnist_dataset(const std::filesystem::path& dir, std::int64_t n_train = 50000);

/// Debian's dataset-fashion-mnist location, /usr/share/datasets/fashion-mnist.
std::filesystem::path default_mnist_dir();

}  // namespace tensorhub
