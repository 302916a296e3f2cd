// numpy's array files without Python: .npy (one array) and .npz (a zip of .npy files, as
// numpy.savez and numpy.savez_compressed write them), read into named tensors.
//
// Format sources: the .npy format is numpy's NEP 1 ("A simple file format for NumPy arrays",
// numpy/lib/format.py): the magic "\x93NUMPY", a major and minor version byte, the header
// length (2 bytes little-endian in version 1.0, 4 bytes in 2.0 and 3.0), then the header, a
// Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with spaces
// and a newline so that the data is aligned, then the array's bytes. The .npz container is a
// ZIP archive (PKWARE's APPNOTE.TXT, version 6.3: local headers, central directory, end of
// central directory record, the ZIP64 extensions numpy's writer uses); entries are stored
// (numpy.savez) or deflated (numpy.savez_compressed, RFC 1951, inflated with zlib).
//
// Nothing is unpickled: an object array ('|O', which numpy can only write with pickle) is
// refused whatever allow_pickle would say.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "tensorhub/core/named_tensors.h"

namespace tensorhub {

/// Parses the bytes of one .npy file into a C-order, little-endian tensor (a Fortran-order or
/// big-endian array is converted). dtypes: float32, float64, int64, int32, uint8, int8 and
/// bool (safetensors' F32, F64, I64, I32, U8, I8, BOOL). `source` names the file in messages.
/// Throws DataLoss for bytes that are not a well-formed .npy file (bad magic, a header that is
/// not the dict NEP 1 describes, fewer or more data bytes than the shape needs) and
/// InvalidArgument for a well-formed array of another dtype: an object array (pickle, never
/// read), a structured, string, float16 or unsigned 16/32/64-bit array, naming the dtype.
Tensor parse_npy(std::span<const std::byte> bytes, const std::string& source);

/// Parses an .npz archive: each entry "NAME.npy" becomes tensor NAME (as numpy.load names
/// them). Stored and deflated entries are read; their CRC-32 and sizes are checked. Throws
/// DataLoss for a truncated or malformed archive or entry, an encrypted entry or another
/// compression method, InvalidArgument for an entry that is not NAME.npy, a name twice, or
/// an array parse_npy refuses (naming the entry).
NamedTensors parse_npz(std::span<const std::byte> bytes, const std::string& source);

/// Reads the file at `path`: an .npz archive (parse_npz) when it begins with a ZIP signature,
/// else a single .npy array (parse_npy) named after the file's stem. Throws Unavailable when
/// the file cannot be read, and what those throw.
NamedTensors read_numpy_file(const std::filesystem::path& path);

}  // namespace tensorhub
