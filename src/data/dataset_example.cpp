// parse_example_fn: tf.train.Example records (example.h) into pipeline elements.
#include <memory>

#include "dataset_internal.h"
#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

// The dense form of one parsed feature, added to `out` under `name` (see dataset.h).
void add_feature(NamedTensors& out, const std::string& name, FeatureValue&& value) {
  if (auto* dense = std::get_if<Tensor>(&value)) {
    out.emplace(name, std::move(*dense));
  } else if (auto* strings = std::get_if<StringTensor>(&value)) {
    if (!strings->shape.empty()) {
      throw InvalidArgument("parse_example_fn: feature '" + name + "' is a string tensor of shape " +
                            detail::shape_string(strings->shape) +
                            "; a pipeline element holds strings only as a scalar string feature "
                            "(FixedLenFeature shape [])");
    }
    out.emplace(name, bytes_tensor((*strings)[0]));
  } else {
    auto& sparse = std::get<SparseTensor>(value);
    auto* values = std::get_if<Tensor>(&sparse.values);
    if (!values) {
      throw InvalidArgument("parse_example_fn: feature '" + name +
                            "' is a VarLenFeature of strings; a pipeline element holds no string "
                            "tensors (use a numeric dtype or a FixedLenFeature of shape [])");
    }
    out.emplace(name + "/indices", std::move(sparse.indices));
    out.emplace(name + "/values", std::move(*values));
    out.emplace(name + "/dense_shape", std::move(sparse.dense_shape));
  }
}

}  // namespace

Dataset::MapFn parse_example_fn(FeatureSpecs specs, std::string record_key) {
  auto parser = std::make_shared<const ExampleParser>(std::move(specs));  // checks the specs
  return [parser, key = std::move(record_key)](NamedTensors element) {
    auto it = element.find(key);
    if (it == element.end()) {
      throw InvalidArgument("parse_example_fn: the element has no tensor '" + key +
                            "' (the serialized Example)");
    }
    NamedTensors out;
    for (auto& [name, value] : parser->parse_single(tensor_bytes(it->second)))
      add_feature(out, name, std::move(value));
    return out;
  };
}

}  // namespace tensorhub
