// TF Serving's request messages (PredictRequest, ClassificationRequest, RegressionRequest) run
// on a servable: the checks, messages and conversions of the gRPC API (grpc_server.cpp), shared
// with the warmup replay (warmup.cpp), which runs the same requests from a version's
// assets.extra/tf_serving_warmup_requests before the version is AVAILABLE.
//
// Thread safety: free functions of their arguments only.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "tensorflow_serving/apis/classification.pb.h"
#include "tensorflow_serving/apis/input.pb.h"
#include "tensorflow_serving/apis/predict.pb.h"
#include "tensorflow_serving/apis/regression.pb.h"
#include "tensorhub/serve/servable.h"

namespace tensorhub::detail {

/// The predict signature `name` (empty: serving_default) of `servable`. Throws
/// FailedPrecondition (TF Serving's "Serving signature key ... not found") for an unknown name,
/// InvalidArgument pointing at Classify or Regress for a classify or regress signature, whose
/// tf.Example input a predict cannot feed.
const Signature& predict_signature(const Servable& servable, const std::string& name);

/// The model's inputs for `request` on `sig` (the signature `signature` of `servable`): each
/// of request.inputs() decoded (tensor_from_proto), checked against the signature's aliases and
/// dtypes, DT_STRING inputs through the servable's decoding step. Throws InvalidArgument with
/// TF Serving's messages for an unknown alias, a dtype mismatch, a missing input or a bad tensor.
NamedTensors predict_inputs(const Servable& servable, const std::string& signature, const Signature& sig,
                            const tensorflow::serving::PredictRequest& request);

/// The outputs a Predict answers: request.output_filter(), else every output of `sig`. Throws
/// InvalidArgument for an alias the signature lacks or one given twice.
std::set<std::string> predict_outputs(const Signature& sig, const tensorflow::serving::PredictRequest& request);

/// The model's input rows for the examples of `input` (example_list, or example_list_with_context
/// whose context fills features an example lacks), as tf.io.parse_example reads the
/// FixedLenFeatures of `spec`: [examples, width] floats, or one bytes feature handed to the
/// servable's decoding step. Throws InvalidArgument with TF Serving's messages for an empty
/// input, a missing required feature, a feature of another kind or size.
Tensor rows_from_input(const Servable& servable, const ExampleSignature& spec, const tensorflow::serving::Input& input);

/// Number of examples of `input` (example_list or example_list_with_context).
std::int64_t example_count(const tensorflow::serving::Input& input);

/// Fills `result` from a regression's output `y` for `batch` examples, as TF Serving's
/// regressor: one float per example, y of shape [batch] or [batch, 1]. Throws InvalidArgument
/// (TF Serving's messages) for another dtype or shape.
void fill_regression(const Tensor& y, std::int64_t batch, tensorflow::serving::RegressionResult* result);

/// Fills `result` from a classification's scores [batch, classes] (or [batch]: one class),
/// labels from `spec.classes`, else "". Throws InvalidArgument for another dtype or shape,
/// Internal when the signature names another number of classes.
void fill_classification(const Tensor& scores, const ExampleSignature& spec,
                         tensorflow::serving::ClassificationResult* result);

}  // namespace tensorhub::detail
