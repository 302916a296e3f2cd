// How the features of a sharded hub dataset travel through a tensorhub.data pipeline
// (data/dataset.h) and what they become in Python (py_dataset.cpp).
//
// A pipeline element is NamedTensors, which holds no strings and no ragged values, so each
// record is parsed (tf.io.parse_single_example's rules, data/example.h) into tensors that
// padded_batch can stack, and the conversion to Python undoes the padding:
//   form     feature spec                                element tensors        Python, per batch
//   kDense   FixedLen float32/int64, any shape            F32/I64 [shape]        ndarray [B, shape...]
//            FixedLenSequence float32/int64               F32/I64 [rows, shape]  ndarray [B, max rows, shape...]
//                                                                                (padded with its default_value,
//                                                                                 else 0: tf.io.parse_example)
//   kBytes   FixedLen string of shape []; a raw record    U8 [n] + length        list of B `bytes`
//   kRagged  VarLen float32/int64                         F32/I64 [n] + length   list of B 1-D ndarrays
// "+ length" is a hidden I64 scalar (length_key) that survives padded_batch, so the
// padding can be cut off again.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensorhub/data/dataset.h"
#include "tensorhub/data/example.h"

namespace tensorhub::python {

/// How one feature is represented (see the file comment).
enum class FeatureForm { kDense, kBytes, kRagged };

/// One feature of an element.
struct FeatureLayout {
  std::string name;
  FeatureForm form = FeatureForm::kDense;
  std::string length_key;  ///< kBytes / kRagged: the hidden I64 scalar of the value's length
};

/// Every feature of an element, in name order, and padded_batch's padding values.
struct ElementLayout {
  std::vector<FeatureLayout> features;
  std::map<std::string, double> padding_values;  ///< FixedLenSequence defaults by name
};

/// The layout of `specs`. Throws InvalidArgument naming the feature for a string feature
/// other than FixedLenFeature of shape [] (a string tensor of another shape, VarLen or
/// FixedLenSequence of strings): tensorhub.data has no form for them.
ElementLayout layout_of(const FeatureSpecs& specs);

/// The layout of unparsed records: one kBytes feature "record".
ElementLayout raw_record_layout();

/// The pipeline function from from_hub's {"record": U8 [n]} to an element of `layout`:
/// parsed with `parser`, or, when it is null, the record itself under "record". Throws (in
/// the pipeline) what ExampleParser::parse_single throws: InvalidArgument for a record that
/// breaks the specs, DataLoss for bytes that are not a tf.train.Example.
Dataset::MapFn element_fn(std::shared_ptr<const ExampleParser> parser, std::shared_ptr<const ElementLayout> layout);

}  // namespace tensorhub::python
