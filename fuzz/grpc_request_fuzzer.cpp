// libFuzzer target for the gRPC API's request decoding: any byte string as a serialized
// tensorflow.serving.PredictRequest (proto/tensorflow_serving/apis/predict.proto), each of its
// input TensorProtos through tensor_from_proto (serve/tensor_proto.h), as GrpcServer::Predict
// does. A decode either succeeds, and its tensor holds exactly the bytes its shape and dtype
// say and survives tensor_to_proto -> tensor_from_proto unchanged, or throws tensorhub::Error;
// nothing else is allowed. Build and run with scripts/fuzz (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tensorflow_serving/apis/predict.pb.h"
#include "tensorhub/core/error.h"
#include "tensorhub/serve/tensor_proto.h"

using namespace tensorhub;

namespace {

// Small enough that a few request bytes asking for a huge tensor stay within libFuzzer's RSS limit.
constexpr std::size_t kLimit = std::size_t{16} << 20;

void check_round_trip(const ProtoTensor& t) {
  tensorflow::TensorProto again;
  if (t.is_string) {
    if (t.strings.numel() < 0 || static_cast<std::size_t>(t.strings.numel()) != t.strings.values.size()) std::abort();
    tensor_to_proto(t.strings, &again);
    const ProtoTensor back = tensor_from_proto(again, "again", kLimit);
    if (!back.is_string || back.strings.shape != t.strings.shape || back.strings.values != t.strings.values) std::abort();
    return;
  }
  if (t.tensor.numel() < 0 ||
      static_cast<std::size_t>(t.tensor.numel()) * dtype_size(t.tensor.dtype) != t.tensor.data.size())
    std::abort();
  tensor_to_proto(t.tensor, &again);
  const ProtoTensor back = tensor_from_proto(again, "again", kLimit);
  if (back.is_string || back.tensor.dtype != t.tensor.dtype || back.tensor.shape != t.tensor.shape ||
      back.tensor.data != t.tensor.data)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tensorflow::serving::PredictRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;  // gRPC refuses it before us
  for (const auto& [alias, proto] : request.inputs()) {
    try {
      check_round_trip(tensor_from_proto(proto, "inputs[\"" + alias + "\"]", kLimit));
    } catch (const Error&) {
      // malformed tensor: the expected, clean outcome
    }
  }
  return 0;
}
