// TFRecord datasets on the command line: `dataset import --tfrecord`, `dataset export`,
// `dataset head` (dataset_tfrecord_commands.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "commands.h"

namespace tensorhub {

/// What `tensorhub dataset import --tfrecord PATTERN` was given.
struct TfrecordImportArgs {
  /// --tfrecord: files or globs, e.g. 'data/*.tfrecord' (quoted: expanded here) or the list
  /// the shell expanded an unquoted glob into.
  std::vector<std::string> patterns;
  std::string compression;  ///< --compression: "" / NONE, GZIP or ZLIB
  std::string features;     ///< --features: a features JSON file (data/example.h's form), or ""
};

/// Imports the files matching args.patterns (each glob's matches sorted, in the order given, a
/// file named twice taken once) as the shards of dataset `name`: every file is read
/// whole and checked first (TFRecord framing and CRCs with the given compression, and each
/// record parsed as a tf.train.Example under the features when given), then all are stored in
/// one transaction. Prints progress on stderr and the saved dataset on stdout. Throws
/// UsageError for a malformed --compression; NotFound when nothing matches or the features
/// file is missing; InvalidArgument for invalid features (naming the feature) or a record
/// that breaks them; DataLoss naming the file and byte offset for a corrupt, truncated or
/// non-TFRecord file or a wrong compression. Nothing is saved when anything fails.
void run_tfrecord_import(const HubFlags& hub, const std::string& name, const Json& tags,
                         const TfrecordImportArgs& args);

/// Adds `export` and `head` to the `dataset` command.
void add_dataset_tfrecord_commands(CLI::App& dataset);

}  // namespace tensorhub
