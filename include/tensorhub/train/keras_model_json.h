// model.json -> Keras's Model.to_json(): what the TensorBoard callback writes for TensorBoard's
// graph plugin (write_graph). Torch-free.
//
// Format sources: Keras 2.x's Sequential.get_config / Layer.get_config (keras/engine/
// sequential.py, keras/layers/*), written by keras.callbacks.TensorBoard
// (_write_keras_model_train_graph -> keras_model_summary("keras", model, step=0)), and what
// TensorBoard reads of it (tensorboard/plugins/graph/keras_util.py keras_model_to_graph_def):
// the top-level "class_name" and config.name, and for every entry of config.layers its
// "class_name", config.name and config.dtype. A Sequential's layers are chained in order (no
// inbound_nodes): TensorBoard draws node "<model name>/<layer name>" with input the previous
// layer's node, attrs keras_class = class_name and dtype = DT_FLOAT for "float32".
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorhub/summary/event_file_writer.h"

namespace tensorhub {

/// Keras's to_json() of the Sequential model a model.json config describes. Layer names are
/// the config's (Model::config() fills them in); a layer without one gets Keras's name, the
/// snake-case type numbered per type ("dense", "dense_1", "conv2d", ...):
///   {"class_name": "Sequential",
///    "config": {"name": <config's "name", else "sequential">,
///               "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape":
///                            [null, ...input_shape], "dtype": "float32", "sparse": false,
///                            "ragged": false, "name": <Input layer's name, else
///                            "<first layer>_input", Keras's name>}},
///                          {"class_name": "Dense", "config": {"name": "dense",
///                            "trainable": true, "dtype": "float32", "batch_input_shape": [...]
///                            (first layer only), "units": 800, "activation": "relu",
///                            "use_bias": true, "kernel_initializer": {...}, ...}}, ...]}}
/// Each layer's config holds Keras's names for its fields with our defaults filled in (Dense
/// units/activation/use_bias; Conv1D/Conv2D filters, kernel_size and strides as lists,
/// padding, data_format "channels_last", dilation_rate, activation, use_bias; MaxPooling1D/2D
/// pool_size, strides (default pool_size), padding; Dropout rate; Flatten data_format;
/// Activation activation; Rescaling scale, offset; BatchNormalization axis, momentum, epsilon,
/// center, scale; Reshape target_shape; Embedding input_dim, output_dim, mask_zero,
/// embeddings_initializer; GlobalAveragePooling1D data_format, keepdims). A layer type this
/// file does not know keeps its model.json fields as they are (class_name = its "type").
/// Throws InvalidArgument for a config without a "layers" array of objects with a string
/// "type".
nlohmann::json keras_model_json(const nlohmann::json& config);

/// The op graph the TensorBoard callback writes (EventFileWriter::add_graph) for a model's
/// Keras to_json() (keras_model_json's result): the nodes TensorBoard's
/// keras_util.keras_model_to_graph_def builds from it for the conceptual graph, in the same
/// order, so that GRAPHS' "Op graph" shows the layers as "Conceptual graph" does. For every
/// layer that is not a model (no config.layers), in preorder: name "<scope>/<config.name>"
/// (scope: the names of the enclosing models, outermost first, joined by "/"), op and attr
/// keras_class = its class_name, attr dtype = tf_data_type of config.dtype (or of
/// config.dtype.config.name for a dtype policy; left out if unknown, as TensorBoard does),
/// input = the node before it (none for the first): a Sequential's layers are chained in
/// order. keras_util leaves op empty; ours carries the class name so the op graph names it.
/// Functional models' inbound_nodes are not read: keras_model_json writes Sequential models.
/// Example: {"class_name": "Sequential", "config": {"name": "bag", "layers": [InputLayer
/// "words_input", Embedding "words", ...]}} -> "bag/words_input" (no input), "bag/words"
/// (input "bag/words_input"), ...
/// Throws InvalidArgument if a layer (or the model) is not an object with an object "config"
/// and a string config.name, or its "class_name" is not a string.
std::vector<GraphNode> keras_graph_nodes(const nlohmann::json& keras_model);

}  // namespace tensorhub
