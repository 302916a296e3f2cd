// The first user predict of a freshly loaded model, with and without TF Serving's warmup
// (assets.extra/tf_serving_warmup_requests, include/tensorhub/serve/warmup.h), same run: a
// `tensorhub serve` process is started on one model, the bench waits until the version is
// AVAILABLE (GET /v1/models/NAME), then times its first REST predict and the median of the next
// ones (the warm latency). Models: TF Serving's half_plus_two, and the MLP 784 -> 800 -> 800 ->
// 10 (softmax) with one 784-float instance. The warmup file holds --records predict_log records
// of the same request, written here with the generated PredictionLog class and TFRecordWriter.
//
// Usage: bench_serve_warmup [--runs N] [--records K] [--warm N]
// Prints per model and variant the medians over the runs of: time to AVAILABLE, first predict,
// warm predict; then the ratios first predict without / with warmup. No peer: both sides are
// ours (TF Serving's warmup against none); the last line is a JSON summary.
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"
#include "tensorhub/core/named_tensors.h"
#include "tensorhub/core/process.h"
#include "tensorhub/data/tfrecord.h"
#include "tensorhub/train/model.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using tensorhub::bench::Clock;

double ms_since(Clock::time_point t0) { return tensorhub::bench::seconds_since(t0) * 1e3; }

// The warmup file of `records` predict_log records, each a PredictRequest of `model` with one
// instance `x` (shape [1, x.size()], or [1] when `scalar`) for input `input`.
void write_warmup(const fs::path& file, const std::string& model, const std::string& input,
                  const std::vector<float>& x, bool scalar, int records) {
  tensorflow::serving::PredictionLog log;
  auto* request = log.mutable_predict_log()->mutable_request();
  request->mutable_model_spec()->set_name(model);
  auto& t = (*request->mutable_inputs())[input];
  t.set_dtype(tensorflow::DT_FLOAT);
  t.mutable_tensor_shape()->add_dim()->set_size(1);
  if (!scalar) t.mutable_tensor_shape()->add_dim()->set_size(static_cast<std::int64_t>(x.size()));
  for (float v : x) t.add_float_val(v);
  const std::string record = log.SerializeAsString();
  fs::create_directories(file.parent_path());
  tensorhub::write_tfrecord_file(file, std::vector<std::string>(static_cast<std::size_t>(records), record));
}

struct Run {
  double available_ms = 0, first_ms = 0, warm_ms = 0;
};

// One server on `base_path`: time to AVAILABLE, first predict, median of `warm` more.
Run measure(const std::string& tensorhub, const fs::path& base_path, const std::string& model, const std::string& body,
            int warm, const fs::path& log) {
  const int port = tensorhub::free_loopback_port();
  const auto start = Clock::now();
  auto server = tensorhub::bench::start({tensorhub, "serve", "--model_name", model, "--model_base_path",
                                         base_path.string(), "--rest_api_host", "127.0.0.1", "--rest_api_port",
                                         std::to_string(port), "--port", "0"},
                                        log, /*append=*/false);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  Run r;
  for (;;) {
    const auto status = client.Get(("/v1/models/" + model).c_str());
    if (status && status->status == 200 && status->body.find("AVAILABLE") != std::string::npos) break;
    if (ms_since(start) > 120000) throw std::runtime_error("the server did not load " + model + "; see " + log.string());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.available_ms = ms_since(start);
  const std::string path = "/v1/models/" + model + ":predict";
  auto t0 = Clock::now();
  const auto first = client.Post(path.c_str(), body, "application/json");
  r.first_ms = ms_since(t0);
  if (!first || first->status != 200) throw std::runtime_error("the first predict failed; see " + log.string());
  std::vector<double> times;
  for (int i = 0; i < warm; ++i) {
    t0 = Clock::now();
    client.Post(path.c_str(), body, "application/json");
    times.push_back(ms_since(t0));
  }
  r.warm_ms = tensorhub::bench::median(times);
  server.stop();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, records = 10, warm = 20;
  CLI::App app{"The first predict of a freshly loaded model, with and without TF Serving's warmup", "bench_serve_warmup"};
  app.add_option("--runs", runs, "servers started per model and variant")->capture_default_str()->check(tensorhub::bench::at_least_one());
  app.add_option("--records", records, "warmup records (TF Serving allows 1000)")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--warm", warm, "predicts after the first, for the warm latency")->capture_default_str()->check(tensorhub::bench::at_least_one());
  tensorhub::bench::parse_or_exit(app, argc, argv);

  char tmpl[] = "/tmp/tensorhub-warmup-bench-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string tensorhub = std::string(TENSORHUB_BIN_DIR) + "/tensorhub";

  // The two models, each in a base path without warmup ("cold") and one with ("warmup").
  json config = tensorhub::mlp_config(800, 800);
  config["layers"].back()["activation"] = "softmax";
  auto mlp = tensorhub::Model::from_config(config);
  std::vector<float> image(784);
  for (int i = 0; i < 784; ++i) image[i] = static_cast<float>((i % 255) / 255.0);
  const std::string hpt_json = std::string(TENSORHUB_SOURCE_DIR) + "/examples/serving/half_plus_two/00000123/model.json";
  struct ModelCase {
    std::string name, input, body;
    std::vector<float> x;
    bool scalar;
  };
  const std::vector<ModelCase> models = {
      {"half_plus_two", "x", R"({"instances": [1.0]})", {1.0f}, true},
      {"mlp", mlp.config().value("signature", json::object()).value("inputs", std::string("inputs")),
       json({{"instances", {image}}}).dump(), image, false},
  };
  for (const auto& m : models) {
    for (const std::string variant : {"cold", "warmup"}) {
      const fs::path version = dir / variant / m.name / "1";
      fs::create_directories(version);
      if (m.name == "half_plus_two") {
        fs::copy_file(hpt_json, version / "model.json");
      } else {
        std::ofstream(version / "model.json") << mlp.config().dump();
        tensorhub::write_safetensors(version / "weights.safetensors", mlp.weights());
      }
      if (variant == "warmup")
        write_warmup(version / "assets.extra" / "tf_serving_warmup_requests", m.name, m.input, m.x, m.scalar, records);
    }
  }

  json summary = {{"runs", runs}, {"records", records}, {"results", json::object()}};
  std::printf("tensorhub serve started %d times per row; medians; warmup: %d predict_log records\n", runs, records);
  std::printf("%-14s %-8s %14s %16s %15s\n", "model", "variant", "available ms", "first predict ms", "warm predict ms");
  for (const auto& m : models) {
    for (const std::string variant : {"cold", "warmup"}) {
      std::vector<double> available, first, steady;
      for (int i = 0; i < runs; ++i) {
        // Alternating would not change much: each run is a fresh process either way.
        const Run r = measure(tensorhub, dir / variant / m.name, m.name, m.body, warm, dir / (variant + ".log"));
        available.push_back(r.available_ms);
        first.push_back(r.first_ms);
        steady.push_back(r.warm_ms);
      }
      const double a = tensorhub::bench::median(available), f = tensorhub::bench::median(first),
                   w = tensorhub::bench::median(steady);
      std::printf("%-14s %-8s %14.1f %16.2f %15.2f\n", m.name.c_str(), variant.c_str(), a, f, w);
      summary["results"][m.name][variant] = {{"available_ms", a}, {"first_ms", f}, {"warm_ms", w}};
    }
  }
  for (const auto& m : models) {
    const auto& r = summary["results"][m.name];
    const double ratio = r["cold"]["first_ms"].get<double>() / r["warmup"]["first_ms"].get<double>();
    tensorhub::bench::print_ratio("first predict without / with warmup on " + m.name, ratio, 2, "x");
    summary["ratios"][m.name] = ratio;
  }
  fs::remove_all(dir);
  std::cout << summary.dump() << std::endl;
  return 0;
}
