// TensorProto <-> tensorhub tensors (serve/tensor_proto.h), in-process: TensorFlow's reading
// rules (tensor_content or the typed field, the last value filling up the shape), each
// supported dtype both ways, and each refusal naming the field.
#include <gtest/gtest.h>

#include <cstring>

#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorhub/serve/grpc_server.h"
#include "tensorflow_serving/config/model_server_config.pb.h"
#include "tensorhub/serve/tensor_proto.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

tensorflow::TensorProto proto(tensorflow::DataType dtype, std::vector<std::int64_t> shape) {
  tensorflow::TensorProto p;
  p.set_dtype(dtype);
  for (auto d : shape) p.mutable_tensor_shape()->add_dim()->set_size(d);
  return p;
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.as<T>(), t.as<T>() + t.numel());
}

TEST(TensorProto, ReadsEachDtypeFromItsTypedField) {
  auto f = proto(tensorflow::DT_FLOAT, {2, 2});
  for (float v : {1.5f, -2.f, 0.25f, 8.f}) f.add_float_val(v);
  const auto a = tensor_from_proto(f, "x");
  ASSERT_FALSE(a.is_string);
  EXPECT_EQ(a.tensor.dtype, DType::kF32);
  EXPECT_EQ(a.tensor.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(values_of<float>(a.tensor), (std::vector<float>{1.5f, -2.f, 0.25f, 8.f}));

  auto d = proto(tensorflow::DT_DOUBLE, {2});
  d.add_double_val(0.1), d.add_double_val(1e300);
  EXPECT_EQ(values_of<double>(tensor_from_proto(d, "x").tensor), (std::vector<double>{0.1, 1e300}));

  auto i32 = proto(tensorflow::DT_INT32, {3});
  for (int v : {-7, 0, 2147483647}) i32.add_int_val(v);
  EXPECT_EQ(values_of<std::int32_t>(tensor_from_proto(i32, "x").tensor), (std::vector<std::int32_t>{-7, 0, 2147483647}));

  auto i64 = proto(tensorflow::DT_INT64, {2});
  i64.add_int64_val(-9000000000LL), i64.add_int64_val(5);
  const auto b = tensor_from_proto(i64, "x").tensor;
  EXPECT_EQ(b.dtype, DType::kI64);
  EXPECT_EQ(values_of<std::int64_t>(b), (std::vector<std::int64_t>{-9000000000LL, 5}));

  auto bools = proto(tensorflow::DT_BOOL, {3});
  bools.add_bool_val(true), bools.add_bool_val(false), bools.add_bool_val(true);
  const auto c = tensor_from_proto(bools, "x").tensor;
  EXPECT_EQ(c.dtype, DType::kBool);
  EXPECT_EQ(values_of<std::uint8_t>(c), (std::vector<std::uint8_t>{1, 0, 1}));

  auto s = proto(tensorflow::DT_STRING, {2});
  s.add_string_val("abc"), s.add_string_val(std::string("\0\xff", 2));
  const auto strings = tensor_from_proto(s, "x");
  ASSERT_TRUE(strings.is_string);
  EXPECT_EQ(strings.strings.shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(strings.strings.values, (std::vector<std::string>{"abc", std::string("\0\xff", 2)}));
}

TEST(TensorProto, ReadsTensorContentLittleEndianRowMajor) {
  auto f = proto(tensorflow::DT_FLOAT, {3});
  const float xs[] = {1.f, 2.5f, -4.f};
  f.set_tensor_content(std::string(reinterpret_cast<const char*>(xs), sizeof xs));
  EXPECT_EQ(values_of<float>(tensor_from_proto(f, "x").tensor), (std::vector<float>{1.f, 2.5f, -4.f}));

  auto i64 = proto(tensorflow::DT_INT64, {1, 2});
  const std::int64_t ns[] = {1LL << 40, -1};
  i64.set_tensor_content(std::string(reinterpret_cast<const char*>(ns), sizeof ns));
  EXPECT_EQ(values_of<std::int64_t>(tensor_from_proto(i64, "x").tensor), (std::vector<std::int64_t>{1LL << 40, -1}));

  // Any non-zero byte of a bool is true.
  auto bools = proto(tensorflow::DT_BOOL, {3});
  bools.set_tensor_content(std::string("\x00\x01\x07", 3));
  EXPECT_EQ(values_of<std::uint8_t>(tensor_from_proto(bools, "x").tensor), (std::vector<std::uint8_t>{0, 1, 1}));
}

TEST(TensorProto, FewerValuesRepeatTheLastAndNoneAreZeros) {
  auto f = proto(tensorflow::DT_FLOAT, {4});
  f.add_float_val(1.f), f.add_float_val(3.f);
  EXPECT_EQ(values_of<float>(tensor_from_proto(f, "x").tensor), (std::vector<float>{1.f, 3.f, 3.f, 3.f}));
  const auto zeros = tensor_from_proto(proto(tensorflow::DT_INT32, {2}), "x").tensor;
  EXPECT_EQ(values_of<std::int32_t>(zeros), (std::vector<std::int32_t>{0, 0}));
  auto s = proto(tensorflow::DT_STRING, {3});
  s.add_string_val("a");
  EXPECT_EQ(tensor_from_proto(s, "x").strings.values, (std::vector<std::string>{"a", "a", "a"}));
  // A scalar: no dims, one element.
  auto scalar = proto(tensorflow::DT_DOUBLE, {});
  scalar.add_double_val(2.0);
  const auto t = tensor_from_proto(scalar, "x").tensor;
  EXPECT_TRUE(t.shape.empty());
  EXPECT_EQ(values_of<double>(t), (std::vector<double>{2.0}));
}

TEST(TensorProto, RefusalsNameTheField) {
  const std::string field = "inputs[\"x\"]";
  auto too_many = proto(tensorflow::DT_FLOAT, {1});
  too_many.add_float_val(1), too_many.add_float_val(2);
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(too_many, field); }, "too many"),
            "inputs[\"x\"].float_val holds 2 values but tensor_shape holds 1");

  auto content = proto(tensorflow::DT_INT64, {2});
  content.set_tensor_content("abc");
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(content, field); }, "content"),
            "inputs[\"x\"].tensor_content holds 3 bytes but tensor_shape [2] of DT_INT64 needs 16");

  auto wrong_field = proto(tensorflow::DT_FLOAT, {1});
  wrong_field.add_double_val(1);
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(wrong_field, field); }, "field")
                .find("inputs[\"x\"]: values are in a field other than float_val"),
            std::string::npos);

  auto half = proto(tensorflow::DT_HALF, {1});
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(half, field); }, "half")
                .find("inputs[\"x\"].dtype DT_HALF is not supported"),
            std::string::npos);

  auto negative = proto(tensorflow::DT_FLOAT, {2, -1});
  EXPECT_EQ(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(negative, field); }, "negative"),
            "inputs[\"x\"].tensor_shape.dim[1].size is -1; dimensions must be >= 0");

  auto unknown = proto(tensorflow::DT_FLOAT, {});
  unknown.mutable_tensor_shape()->set_unknown_rank(true);
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(unknown, field); }, "rank")
                .find("unknown_rank"),
            std::string::npos);

  // A few bytes of request may not ask for a huge tensor: the limit is checked first.
  auto huge = proto(tensorflow::DT_FLOAT, {1 << 20, 1 << 20});
  huge.add_float_val(1);
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(huge, field); }, "huge")
                .find("exceed the server's limit"),
            std::string::npos);
  auto overflow = proto(tensorflow::DT_FLOAT, {1LL << 40, 1LL << 40});
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(overflow, field); }, "overflow")
                .find("overflow"),
            std::string::npos);
  auto strings = proto(tensorflow::DT_STRING, {1 << 30});
  strings.add_string_val("x");
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(strings, field, 1 << 20); }, "strings")
                .find("exceed the server's limit"),
            std::string::npos);
  auto string_content = proto(tensorflow::DT_STRING, {1});
  string_content.set_tensor_content("x");
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { tensor_from_proto(string_content, field); }, "sc")
                .find("string_val, not tensor_content"),
            std::string::npos);
}

TEST(TensorProto, WritesTypedFieldsThatReadBackEqual) {
  const auto f = Tensor::from(DType::kF32, {2, 1}, std::vector<float>{0.5f, -1.f});
  tensorflow::TensorProto p;
  tensor_to_proto(f, &p);
  EXPECT_EQ(p.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(p.tensor_shape().dim_size(), 2);
  EXPECT_EQ(p.tensor_shape().dim(0).size(), 2);
  EXPECT_EQ(p.tensor_shape().dim(1).size(), 1);
  EXPECT_EQ(std::vector<float>(p.float_val().begin(), p.float_val().end()), (std::vector<float>{0.5f, -1.f}));
  EXPECT_TRUE(p.tensor_content().empty());

  for (const Tensor& t : {Tensor::from(DType::kF64, {2}, std::vector<double>{1.25, -3.0}),
                          Tensor::from(DType::kI32, {3}, std::vector<std::int32_t>{1, -2, 3}),
                          Tensor::from(DType::kI64, {1}, std::vector<std::int64_t>{1LL << 50}),
                          Tensor::from(DType::kBool, {2}, std::vector<std::uint8_t>{1, 0}),
                          Tensor::from(DType::kU8, {2}, std::vector<std::uint8_t>{255, 7})}) {
    tensor_to_proto(t, &p);
    const auto back = tensor_from_proto(p, "y").tensor;
    EXPECT_EQ(back.dtype, t.dtype) << dtype_name(t.dtype);
    EXPECT_EQ(back.shape, t.shape) << dtype_name(t.dtype);
    EXPECT_EQ(back.data, t.data) << dtype_name(t.dtype);
  }
  BytesTensor s{{2}, {"a", std::string("\0b", 2)}};
  tensor_to_proto(s, &p);
  EXPECT_EQ(p.dtype(), tensorflow::DT_STRING);
  EXPECT_EQ(tensor_from_proto(p, "y").strings.values, s.values);
}

TEST(TensorProto, ReloadConfigReadsAsModelConfigFile) {
  tensorflow::serving::ModelServerConfig config;
  auto* c = config.mutable_model_config_list()->add_config();
  c->set_name("m");
  c->set_base_path("/models/m");
  c->set_model_platform("tensorflow");
  c->mutable_model_version_policy()->mutable_specific()->add_versions(3);
  (*c->mutable_version_labels())["stable"] = 3;
  const auto configs = model_configs_from_proto(config);
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].name, "m");
  EXPECT_EQ(configs[0].base_path, "/models/m");
  EXPECT_EQ(configs[0].policy.kind, VersionPolicy::kSpecific);
  EXPECT_EQ(configs[0].policy.versions, (std::set<std::int64_t>{3}));
  EXPECT_EQ(configs[0].labels, (std::map<std::string, std::int64_t>{{"stable", 3}}));

  c->set_model_platform("pytorch");
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { model_configs_from_proto(config); }, "platform")
                .find("model_platform \"pytorch\""),
            std::string::npos);
  config.mutable_custom_model_config();
  EXPECT_NE(error_message_of(ErrorKind::kInvalidArgument, [&] { model_configs_from_proto(config); }, "custom")
                .find("custom_model_config"),
            std::string::npos);
}

}  // namespace
}  // namespace tensorhub
