// model.json -> Keras's Model.to_json() (keras_model_json.h).
#include "tensorhub/train/keras_model_json.h"

#include <cctype>
#include <map>
#include <set>
#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub {

using json = nlohmann::json;

namespace {

// Keras's to_snake_case for class names: "MaxPooling2D" -> "max_pooling2d".
std::string snake_case(const std::string& type) {
  std::string out;
  for (std::size_t i = 0; i < type.size(); ++i) {
    const char c = type[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i > 0 &&
        std::islower(static_cast<unsigned char>(type[i - 1])))
      out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

json value_or(const json& spec, const char* key, json fallback) {
  return spec.contains(key) ? spec.at(key) : std::move(fallback);
}

// kernel_size / strides / pool_size: n or a list, as Keras's list of `rank` entries.
json as_list(const json& v, std::size_t rank) {
  if (v.is_array()) return v;
  return json(std::vector<json>(rank, v));
}

json glorot_uniform() { return {{"class_name", "GlorotUniform"}, {"config", {{"seed", nullptr}}}}; }
json zeros() { return {{"class_name", "Zeros"}, {"config", json::object()}}; }

void conv_fields(const json& spec, json& c, std::size_t rank) {
  c["filters"] = value_or(spec, "filters", nullptr);
  c["kernel_size"] = as_list(value_or(spec, "kernel_size", nullptr), rank);
  c["strides"] = as_list(value_or(spec, "strides", 1), rank);
  c["padding"] = value_or(spec, "padding", "valid");
  c["data_format"] = "channels_last";
  c["dilation_rate"] = as_list(1, rank);
  c["groups"] = 1;
  c["activation"] = value_or(spec, "activation", "linear");
  c["use_bias"] = value_or(spec, "use_bias", true);
  c["kernel_initializer"] = glorot_uniform();
  c["bias_initializer"] = zeros();
}

void pool_fields(const json& spec, json& c, std::size_t rank) {
  const json pool = as_list(value_or(spec, "pool_size", 2), rank);
  c["pool_size"] = pool;
  c["padding"] = value_or(spec, "padding", "valid");
  c["strides"] = spec.contains("strides") ? as_list(spec.at("strides"), rank) : pool;
  c["data_format"] = "channels_last";
}

// The Keras fields of one layer of type `type` (beyond name, trainable, dtype).
void keras_fields(const std::string& type, const json& spec, json& c) {
  if (type == "Dense") {
    c["units"] = value_or(spec, "units", nullptr);
    c["activation"] = value_or(spec, "activation", "linear");
    c["use_bias"] = value_or(spec, "use_bias", true);
    c["kernel_initializer"] = glorot_uniform();
    c["bias_initializer"] = zeros();
  } else if (type == "Dropout") {
    c["rate"] = value_or(spec, "rate", nullptr);
    c["noise_shape"] = nullptr;
    c["seed"] = nullptr;
  } else if (type == "Flatten" || type == "GlobalAveragePooling1D") {
    c["data_format"] = "channels_last";
    if (type != "Flatten") c["keepdims"] = value_or(spec, "keepdims", false);
  } else if (type == "Activation") {
    c["activation"] = value_or(spec, "activation", "linear");
  } else if (type == "Rescaling") {
    c["scale"] = value_or(spec, "scale", nullptr);
    c["offset"] = value_or(spec, "offset", 0.0);
  } else if (type == "Conv2D" || type == "Conv1D") {
    conv_fields(spec, c, type == "Conv2D" ? 2 : 1);
  } else if (type == "MaxPooling2D" || type == "MaxPooling1D") {
    pool_fields(spec, c, type == "MaxPooling2D" ? 2 : 1);
  } else if (type == "BatchNormalization") {
    c["axis"] = value_or(spec, "axis", -1);
    c["momentum"] = value_or(spec, "momentum", 0.99);
    c["epsilon"] = value_or(spec, "epsilon", 1e-3);
    c["center"] = value_or(spec, "center", true);
    c["scale"] = value_or(spec, "scale", true);
  } else if (type == "Reshape") {
    c["target_shape"] = value_or(spec, "target_shape", nullptr);
  } else if (type == "Embedding") {
    c["input_dim"] = value_or(spec, "input_dim", nullptr);
    c["output_dim"] = value_or(spec, "output_dim", nullptr);
    c["embeddings_initializer"] = {{"class_name", "RandomUniform"},
                                   {"config", {{"minval", -0.05}, {"maxval", 0.05}, {"seed", nullptr}}}};
    c["mask_zero"] = value_or(spec, "mask_zero", false);
    c["input_length"] = nullptr;
  } else {
    for (const auto& [k, v] : spec.items())  // a type added later: its own fields
      if (k != "type" && k != "name" && k != "input_shape") c[k] = v;
  }
}

// Per-example input shape: top-level input_shape, an Input layer's shape, or the first
// layer's input_shape (model.json's three ways).
json input_shape_of(const json& config) {
  if (config.contains("input_shape")) return config.at("input_shape");
  const json& first = config.at("layers").at(0);
  if (first.contains("shape")) return first.at("shape");
  return value_or(first, "input_shape", json::array());
}

}  // namespace

json keras_model_json(const json& config) {
  if (!config.is_object() || !config.contains("layers") || !config.at("layers").is_array() ||
      config.at("layers").empty())
    throw InvalidArgument("keras_model_json: the config has no \"layers\" array; give a model.json config");
  json batch_input_shape = json::array({nullptr});
  for (const auto& d : input_shape_of(config)) batch_input_shape.push_back(d);
  json layers = json::array();
  std::set<std::string> used;
  std::map<std::string, int> counters;
  const json& in = config.at("layers");
  for (std::size_t i = 0; i < in.size(); ++i) {
    const json& spec = in[i];
    if (!spec.is_object() || !spec.contains("type") || !spec.at("type").is_string())
      throw InvalidArgument("keras_model_json: layers[" + std::to_string(i) + "] has no string \"type\"");
    const std::string type = spec.at("type").get<std::string>();
    std::string name;
    if (spec.contains("name") && spec.at("name").is_string()) {
      name = spec.at("name").get<std::string>();
    } else {
      const std::string prefix = type == "Input" ? "input" : snake_case(type);
      do {
        const int k = counters[prefix]++ + (type == "Input" ? 1 : 0);
        name = k == 0 ? prefix : prefix + "_" + std::to_string(k);
      } while (used.count(name));
    }
    used.insert(name);
    if (type == "Input") {
      layers.push_back({{"class_name", "InputLayer"},
                        {"config", {{"batch_input_shape", batch_input_shape}, {"dtype", "float32"},
                                    {"sparse", false}, {"ragged", false}, {"name", name}}}});
      continue;
    }
    if (layers.empty())  // Keras 2.x: Sequential's config starts with its InputLayer
      layers.push_back({{"class_name", "InputLayer"},
                        {"config", {{"batch_input_shape", batch_input_shape}, {"dtype", "float32"},
                                    {"sparse", false}, {"ragged", false}, {"name", name + "_input"}}}});
    json c = {{"name", name}, {"trainable", true}, {"dtype", "float32"}};
    if (layers.size() == 1) c["batch_input_shape"] = batch_input_shape;
    keras_fields(type, spec, c);
    layers.push_back({{"class_name", type}, {"config", std::move(c)}});
  }
  const std::string model_name =
      config.contains("name") && config.at("name").is_string() && !config.at("name").get<std::string>().empty()
          ? config.at("name").get<std::string>()
          : "sequential";
  return {{"class_name", "Sequential"}, {"config", {{"name", model_name}, {"layers", std::move(layers)}}}};
}

namespace {

// One step of keras_util._walk_layers: a model opens a name scope for its layers, any other
// layer becomes a node fed by the node before it.
void add_keras_graph_nodes(const json& layer, const std::string& scope, std::vector<GraphNode>& out) {
  const auto it = layer.find("config");  // end() for a non-object too
  const json* config = it != layer.end() ? &*it : nullptr;
  if (!config || !config->is_object() || !config->contains("name") || !config->at("name").is_string())
    throw InvalidArgument("keras_graph_nodes: a layer is not an object with a \"config\" that has a string "
                          "\"name\"; give Keras's to_json() of the model (keras_model_json)");
  const std::string name = config->at("name");
  const std::string scoped = scope.empty() ? name : scope + "/" + name;
  if (config->contains("layers") && !config->at("layers").is_null()) {
    if (!config->at("layers").is_array())
      throw InvalidArgument("keras_graph_nodes: model '" + scoped + "' has a \"layers\" that is not an array");
    for (const json& sub : config->at("layers")) add_keras_graph_nodes(sub, scoped, out);
    return;
  }
  GraphNode node;
  node.name = scoped;
  if (layer.contains("class_name")) {
    if (!layer.at("class_name").is_string())
      throw InvalidArgument("keras_graph_nodes: layer '" + scoped + "' has a \"class_name\" that is not a string");
    node.op = layer.at("class_name");
    node.string_attrs["keras_class"] = node.op;
  }
  // A dtype policy is {"class_name": "Policy", "config": {"name": "float32"}}.
  json name_of_dtype = config->value("dtype", json());
  if (name_of_dtype.is_object()) {
    const json policy = name_of_dtype.value("config", json());
    name_of_dtype = policy.is_object() ? policy.value("name", json()) : json();
  }
  if (name_of_dtype.is_string())
    if (auto t = tf_data_type(name_of_dtype.get<std::string>())) node.type_attrs["dtype"] = *t;
  if (!out.empty()) node.input.push_back(out.back().name);
  out.push_back(std::move(node));
}

}  // namespace

std::vector<GraphNode> keras_graph_nodes(const json& keras_model) {
  std::vector<GraphNode> nodes;
  add_keras_graph_nodes(keras_model, "", nodes);
  return nodes;
}

}  // namespace tensorhub
