// TensorFlow's TensorProto (tensorflow/core/framework/tensor.proto) <-> tensorhub's tensors, for
// TF Serving's gRPC API (PredictRequest.inputs, PredictResponse.outputs).
//
// Read as TensorFlow's Tensor::FromProto reads: tensor_content (row-major little-endian bytes,
// exactly numel x element size) or the typed field of the dtype (float_val, double_val,
// int_val, int64_val, bool_val, string_val); a typed field with fewer values than the shape
// holds is filled up with its last value (TensorFlow's "version 0" rule, so {float_val: 1.0}
// with shape [3] is [1, 1, 1]), and an empty one with zeros. Unlike TensorFlow, which drops
// them silently, more values than the shape holds are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensorhub/core/named_tensors.h"
#include "tensorhub/serve/servable.h"

namespace tensorflow {
class TensorProto;
}

namespace tensorhub {

/// A decoded TensorProto: numeric (tensor) or DT_STRING (strings).
struct ProtoTensor {
  bool is_string = false;
  Tensor tensor;         ///< when !is_string
  BytesTensor strings;  ///< when is_string
};

/// Largest tensor tensor_from_proto builds by default (bytes of elements; strings count their
/// bytes). A typed field can ask for a large tensor in a few bytes of request.
inline constexpr std::size_t kMaxProtoTensorBytes = std::size_t{1} << 30;

/// Decodes `proto`. `field` names it in messages (e.g. "inputs[\"x\"]"). Throws
/// InvalidArgument naming the field for: a dtype other than DT_FLOAT, DT_DOUBLE, DT_INT32,
/// DT_INT64, DT_BOOL, DT_STRING, DT_UINT8, DT_INT8; a shape with unknown_rank or a negative
/// dimension; tensor_content whose size is not numel x element size (or set on DT_STRING);
/// more typed values than the shape holds, or values in another dtype's field; a tensor over
/// `max_bytes`.
ProtoTensor tensor_from_proto(const tensorflow::TensorProto& proto, const std::string& field,
                              std::size_t max_bytes = kMaxProtoTensorBytes);

/// Writes `tensor` to `out` (cleared first) in the typed field of its dtype (float_val, ...),
/// as TF Serving writes Predict outputs. DT_UINT8 and DT_INT8 go to int_val.
void tensor_to_proto(const Tensor& tensor, tensorflow::TensorProto* out);

/// Writes a DT_STRING tensor to `out` (cleared first) in string_val.
void tensor_to_proto(const BytesTensor& strings, tensorflow::TensorProto* out);

/// TensorFlow's DataType number of a signature tensor (DT_FLOAT = 1, ..., DT_STRING = 7).
int tf_data_type(const TensorInfo& info);

}  // namespace tensorhub
