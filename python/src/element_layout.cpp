#include "element_layout.h"

#include <cstring>
#include <string_view>
#include <utility>
#include <variant>

#include "tensorhub/core/error.h"

namespace tensorhub::python {
namespace {

// The hidden length tensor of feature `name`: a NUL first, so that no feature name of a
// features file collides with it in practice (layout_of checks anyway).
std::string length_key_of(const std::string& name) { return std::string(1, '\0') + "length:" + name; }

Tensor length_tensor(std::size_t n) {
  return Tensor::from<std::int64_t>(DType::kI64, {}, {static_cast<std::int64_t>(n)});
}

std::string unsupported(const std::string& name, const std::string& what) {
  return "tensorhub.data: feature '" + name + "' is " + what +
         "; tensorhub.data yields string features of shape [] only (FixedLenFeature, shape []): "
         "pass features= without it, or with it as a string of shape []";
}

// The form of one spec, or throws InvalidArgument (see layout_of).
FeatureForm form_of(const std::string& name, const FeatureSpec& spec) {
  if (const auto* f = std::get_if<FixedLenFeature>(&spec)) {
    if (f->dtype != FeatureDType::kString) return FeatureForm::kDense;
    if (!f->shape.empty())
      throw InvalidArgument(unsupported(name, "a FixedLenFeature of strings of shape " + shape_to_string(f->shape)));
    return FeatureForm::kBytes;
  }
  if (const auto* v = std::get_if<VarLenFeature>(&spec)) {
    if (v->dtype == FeatureDType::kString) throw InvalidArgument(unsupported(name, "a VarLenFeature of strings"));
    return FeatureForm::kRagged;
  }
  const auto& s = std::get<FixedLenSequenceFeature>(spec);
  if (s.dtype == FeatureDType::kString) throw InvalidArgument(unsupported(name, "a FixedLenSequenceFeature of strings"));
  return FeatureForm::kDense;
}

// A FixedLenSequence default as padded_batch's padding value (the parser has checked that
// it is one value of the feature's dtype).
void add_padding(ElementLayout& layout, const std::string& name, const FeatureSpec& spec) {
  const auto* s = std::get_if<FixedLenSequenceFeature>(&spec);
  if (!s) return;
  if (const auto* f = std::get_if<std::vector<float>>(&s->default_value); f && !f->empty())
    layout.padding_values[name] = (*f)[0];
  if (const auto* i = std::get_if<std::vector<std::int64_t>>(&s->default_value); i && !i->empty())
    layout.padding_values[name] = static_cast<double>((*i)[0]);
}

// Adds `record`'s bytes (a U8 [n] tensor) and their length.
void add_bytes(NamedTensors& out, const FeatureLayout& f, Tensor bytes) {
  const std::size_t n = bytes.data.size();
  out.emplace(f.name, std::move(bytes));
  out.emplace(f.length_key, length_tensor(n));
}

// Adds one parsed feature in its layout's form.
void add_feature(NamedTensors& out, const FeatureLayout& f, FeatureValue&& value) {
  switch (f.form) {
    case FeatureForm::kDense:
      out.emplace(f.name, std::move(std::get<Tensor>(value)));
      return;
    case FeatureForm::kBytes:
      add_bytes(out, f, bytes_tensor(std::get<StringTensor>(value)[0]));
      return;
    case FeatureForm::kRagged: {
      Tensor& values = std::get<Tensor>(std::get<SparseTensor>(value).values);
      const auto n = static_cast<std::size_t>(values.numel());
      out.emplace(f.name, std::move(values));
      out.emplace(f.length_key, length_tensor(n));
      return;
    }
  }
}

}  // namespace

ElementLayout layout_of(const FeatureSpecs& specs) {
  ElementLayout layout;
  for (const auto& [name, spec] : specs) {
    FeatureLayout f{name, form_of(name, spec), ""};
    if (f.form != FeatureForm::kDense) {
      f.length_key = length_key_of(name);
      if (specs.contains(f.length_key))
        throw InvalidArgument("tensorhub.data: feature names '" + name + "' and its length's name collide");
    }
    add_padding(layout, name, spec);
    layout.features.push_back(std::move(f));
  }
  return layout;
}

ElementLayout raw_record_layout() {
  ElementLayout layout;
  layout.features.push_back({"record", FeatureForm::kBytes, length_key_of("record")});
  return layout;
}

Dataset::MapFn element_fn(std::shared_ptr<const ExampleParser> parser, std::shared_ptr<const ElementLayout> layout) {
  return [parser = std::move(parser), layout = std::move(layout)](NamedTensors element) {
    auto record = element.find("record");  // from_hub's element
    if (record == element.end()) throw Internal("tensorhub.data: the source's element has no \"record\"");
    NamedTensors out;
    if (!parser) {
      add_bytes(out, layout->features.at(0), std::move(record->second));
      return out;
    }
    const auto& bytes = record->second.data;
    ParsedFeatures parsed =
        parser->parse_single(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    for (const FeatureLayout& f : layout->features) add_feature(out, f, std::move(parsed.at(f.name)));
    return out;
  };
}

}  // namespace tensorhub::python
