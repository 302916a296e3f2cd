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

namespace tensorhub::data {

/// Reads one IDX file (".gz" is decompressed with zlib). Only type code 0x08 (unsigned byte,
/// the type MNIST uses) is supported. Returns a U8 tensor with the file's dimensions, e.g.
/// [60000, 28, 28] for train images and [60000] for train labels.
/// Throws Unavailable if the file is missing or unreadable, and DataLoss if the magic number
/// is wrong or the file is shorter than its header says; each message names the file.
Tensor read_idx(const std::filesystem::path& path);

/// The six tensors of the original TensorLayer example (tl.files.load_mnist_dataset with
/// shape (-1, 784)): X_* are F32 [n, 784] scaled to [0, 1], y_* are I64 [n].
struct MnistSplits {
  Tensor X_train, y_train, X_val, y_val, X_test, y_test;
};

/// Loads an MNIST-format directory (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
/// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]) and splits the training set into
/// the first `n_train` examples (train) and the rest (validation), as the original does
/// (50,000 / 10,000). Throws what read_idx throws, and InvalidArgument if n_train exceeds the
/// training set or image and label counts differ.
MnistSplits load_mnist_dataset(const std::filesystem::path& dir, std::int64_t n_train = 50000);

/// Debian's dataset-fashion-mnist location, /usr/share/datasets/fashion-mnist.
std::filesystem::path default_mnist_dir();

}  // namespace tensorhub::data
