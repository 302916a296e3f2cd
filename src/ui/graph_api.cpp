// The Graph view's API (graph_api.h): layers and parameter totals from model_json, weight
// histograms from the stored safetensors and the linked TensorBoard run.
#include "graph_api.h"

#include <algorithm>
#include <cmath>

#include "tensorhub/core/error.h"
#include "tensorhub/core/named_tensors.h"
#include "dashboard_api.h"

namespace tensorhub {

namespace fs = std::filesystem;

namespace {

// Keras's non-trainable weights of a layer: BatchNormalization's moving_mean and
// moving_variance, one each per channel (the last axis).
std::int64_t non_trainable_params(const Json& layer) {
  if (layer.value("type", "") != "BatchNormalization") return 0;
  const Json& shape = layer.at("input_shape");
  return shape.empty() ? 0 : 2 * shape.back().get<std::int64_t>();
}

// The stored weights of a model, or none for a model saved without them.
std::optional<NamedTensors> stored_weights(Hub& hub, const Document& d) {
  const auto bytes = hub.load_model_part(d, "weights.safetensors");
  if (!bytes) return std::nullopt;
  return from_safetensors(*bytes, "model " + std::to_string(d.id) + "'s weights.safetensors");
}

// The answer for a model.json the view cannot draw: what is wrong, and the text itself.
Json unplaceable(Json answer, const std::vector<std::byte>& part, const std::string& why) {
  answer["error"] = why;
  answer["architecture"] = nullptr;
  answer["architecture_text"] = std::string(reinterpret_cast<const char*>(part.data()), part.size());
  answer["layers"] = Json::array();
  return answer;
}

void add_weight_names(Json& layers, const std::optional<NamedTensors>& weights) {
  for (auto& layer : layers) {
    Json names = Json::array();
    const std::string prefix = layer.at("name").get<std::string>() + ".";
    if (weights)
      for (const auto& [name, t] : *weights)
        if (name.starts_with(prefix)) names.push_back({{"name", name}, {"shape", t.shape}, {"dtype", dtype_name(t.dtype)}});
    layer["weights"] = std::move(names);
  }
}

}  // namespace

std::optional<std::string> linked_run(const Json& tags, const fs::path& logdir, std::string& note) {
  if (logdir.empty()) {
    note = "start tensorhub ui with --logdir DIR (the TensorBoard callback's log directory) to see how the weights moved";
    return std::nullopt;
  }
  const auto tag = tags.find("log_dir");
  if (tag == tags.end() || !tag->is_string() || tag->get<std::string>().empty()) {
    note = "the model has no \"log_dir\" tag linking it to the TensorBoard callback's run (see README, \"The web dashboard\")";
    return std::nullopt;
  }
  const fs::path dir = tag->get<std::string>();
  std::error_code ec;
  // Relative to DIR first, then as given (an absolute dir makes both the same).
  const std::vector<fs::path> wanted = {fs::weakly_canonical(logdir / dir / "train", ec),
                                        fs::weakly_canonical(dir / "train", ec)};
  for (const auto& run : find_event_runs(logdir)) {
    const fs::path at = fs::weakly_canonical(run_directory(logdir, run), ec);
    if (std::find(wanted.begin(), wanted.end(), at) != wanted.end()) return run;
  }
  note = "no run " + (dir / "train").string() + " under --logdir " + logdir.string() +
         " (the model's log_dir tag names " + dir.string() + ")";
  return std::nullopt;
}

namespace {

// graph_json for a model document found already, with its stored weights (read once per
// request: layer_histograms_json needs them too).
Json graph_of(Hub& hub, const Document& d, const std::optional<NamedTensors>& weights, const fs::path& logdir) {
  const auto part = hub.load_model_part(d, "model.json");
  if (!part) throw NotFound("model " + std::to_string(d.id) + " has no model.json");
  std::string note;
  const auto run = linked_run(d.tags, logdir, note);
  Json answer = {{"id", d.id}, {"model_name", d.tags.value("model_name", "")}, {"tags", encode_non_finite(d.tags)},
                 {"error", nullptr}, {"run", run ? Json(*run) : Json(nullptr)}, {"run_note", note}};
  Json model;
  try {
    model = model_json(hub, d);
  } catch (const Json::parse_error&) {
    return unplaceable(std::move(answer), *part, "model.json is not JSON: the graph needs a Keras-style layer list");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    return unplaceable(std::move(answer), *part, e.message());
  }
  Json layers = model.at("layers");
  std::int64_t non_trainable = 0;
  for (auto& layer : layers) {
    const std::int64_t n = non_trainable_params(layer);
    layer["non_trainable_params"] = n;
    layer["trainable_params"] = layer.at("params").get<std::int64_t>() - n;
    non_trainable += n;
  }
  add_weight_names(layers, weights);
  const std::int64_t total = model.at("total_params");
  answer["architecture"] = model.at("architecture");
  answer["input_shape"] = model.at("input_shape");
  answer["output_shape"] = model.at("output_shape");
  answer["layers"] = std::move(layers);
  answer["total_params"] = total;
  answer["trainable_params"] = total - non_trainable;
  answer["non_trainable_params"] = non_trainable;
  return answer;
}

}  // namespace

Json graph_json(Hub& hub, std::int64_t id, const fs::path& logdir) {
  const Document d = find_model(hub, id);
  return graph_of(hub, d, stored_weights(hub, d), logdir);
}

namespace {

// The bin of `v` among `bins` equal bins of `width` from `lo`, values outside clamped to the
// first or last. Callers pass finite v, lo and width > 0: a NaN would make the cast below
// undefined (in practice an index far past the end).
std::size_t bin_of(double v, double lo, double width, int bins) {
  return static_cast<std::size_t>(std::clamp<double>(std::floor((v - lo) / width), 0, bins - 1));
}

}  // namespace

std::vector<double> rebin_buckets(const std::vector<double>& left, const std::vector<double>& right,
                                  const std::vector<double>& count, double lo, double hi, int bins) {
  std::vector<double> out(static_cast<std::size_t>(bins), 0.0);
  const double width = (hi - lo) / bins;
  if (!std::isfinite(lo) || !std::isfinite(width) || !(width > 0)) return out;  // nothing to place
  const auto bin = [&](double v) { return bin_of(v, lo, width, bins); };
  const std::size_t n = std::min({left.size(), right.size(), count.size()});
  for (std::size_t i = 0; i < n; ++i) {
    // A bucket from a file may hold NaN or infinite bounds (a diverged run's weights): skipped.
    if (count[i] == 0 || !std::isfinite(count[i]) || !std::isfinite(left[i]) || !std::isfinite(right[i])) continue;
    const double a = std::clamp(left[i], lo, hi), b = std::clamp(std::max(left[i], right[i]), lo, hi);
    if (b <= a) {
      out[bin(a)] += count[i];
      continue;
    }
    for (std::size_t k = bin(a); k <= bin(b) && k < out.size(); ++k) {
      const double bl = lo + static_cast<double>(k) * width, br = bl + width;
      const double overlap = std::min(b, br) - std::max(a, bl);
      if (overlap > 0) out[k] += count[i] * overlap / (b - a);
    }
  }
  return out;
}

namespace {

// Of the finite values only (`finite` of them; NaN and infinities, as a diverged training
// leaves, are counted apart and would otherwise make every statistic and bin NaN).
struct Stats {
  double min = 0, max = 0, mean = 0, std = 0;
  std::int64_t finite = 0;
};

template <typename T>
Stats stats_of(const T* v, std::int64_t n) {
  Stats s;
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(v[i]);
    if (!std::isfinite(x)) continue;
    s.min = s.finite ? std::min(s.min, x) : x;
    s.max = s.finite ? std::max(s.max, x) : x;
    sum += x;
    ++s.finite;
  }
  if (s.finite == 0) return s;
  s.mean = sum / static_cast<double>(s.finite);
  double ss = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(v[i]);
    if (std::isfinite(x)) ss += (x - s.mean) * (x - s.mean);
  }
  s.std = std::sqrt(ss / static_cast<double>(s.finite));
  return s;
}

// kWeightBins + 1 equal edges over [lo, hi], or around a constant.
std::vector<double> bin_edges(double lo, double hi) {
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  std::vector<double> edges(kWeightBins + 1);
  for (int i = 0; i <= kWeightBins; ++i) edges[static_cast<std::size_t>(i)] = lo + (hi - lo) * i / kWeightBins;
  edges.back() = hi;
  return edges;
}

// The finite values among n at v counted into the bins of `edges` (finite, ascending).
template <typename T>
std::vector<double> bin_values(const T* v, std::int64_t n, const std::vector<double>& edges) {
  std::vector<double> counts(kWeightBins, 0.0);
  const double lo = edges.front(), width = (edges.back() - lo) / kWeightBins;
  for (std::int64_t i = 0; i < n; ++i)
    if (std::isfinite(static_cast<double>(v[i]))) counts[bin_of(static_cast<double>(v[i]), lo, width, kWeightBins)] += 1;
  return counts;
}

Json tensor_json(const std::string& name, const Tensor& t) {
  Json j = {{"name", name}, {"shape", t.shape}, {"dtype", dtype_name(t.dtype)}, {"count", t.numel()},
            {"edges", Json::array()}, {"counts", Json::array()}, {"history", nullptr}};
  if (t.dtype != DType::kF32 && t.dtype != DType::kF64) return j;
  const Stats s = t.dtype == DType::kF32 ? stats_of(t.as<float>(), t.numel()) : stats_of(t.as<double>(), t.numel());
  const auto edges = bin_edges(s.min, s.max);
  j["min"] = s.min;
  j["max"] = s.max;
  j["mean"] = s.mean;
  j["std"] = s.std;
  j["non_finite"] = t.numel() - s.finite;
  j["edges"] = edges;
  j["counts"] = t.dtype == DType::kF32 ? bin_values(t.as<float>(), t.numel(), edges) : bin_values(t.as<double>(), t.numel(), edges);
  return encode_non_finite(j);
}

// The run's histograms of one tag, rebinned over the range of all its steps.
Json history_json(const std::string& run, const std::string& tag, const std::vector<HistogramEvent>& events) {
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& e : events)
    if (e.histogram.num > 0 && std::isfinite(e.histogram.min) && std::isfinite(e.histogram.max)) {
      lo = any ? std::min(lo, e.histogram.min) : e.histogram.min;
      hi = any ? std::max(hi, e.histogram.max) : e.histogram.max;
      any = true;
    }
  const auto edges = bin_edges(lo, hi);
  Json steps = Json::array(), mins = Json::array(), maxs = Json::array(), nums = Json::array(), counts = Json::array();
  for (const auto& e : events) {
    const Histogram& h = e.histogram;
    std::vector<double> left(h.bucket.size()), right(h.bucket.size());
    for (std::size_t i = 0; i < h.bucket.size(); ++i) {
      left[i] = i == 0 ? h.min : h.bucket_limit[i - 1];
      right[i] = i + 1 == h.bucket.size() ? h.max : h.bucket_limit[i];
    }
    steps.push_back(e.step);
    mins.push_back(h.num > 0 ? h.min : 0.0);
    maxs.push_back(h.num > 0 ? h.max : 0.0);
    nums.push_back(h.num);
    counts.push_back(h.num > 0 ? rebin_buckets(left, right, h.bucket, edges.front(), edges.back())
                               : std::vector<double>(kWeightBins, 0.0));
  }
  return {{"run", run}, {"tag", tag}, {"steps", steps}, {"min", mins}, {"max", maxs}, {"num", nums},
          {"edges", edges}, {"counts", counts}};
}

}  // namespace

Json layer_histograms_json(Hub& hub, std::int64_t id, const std::string& layer, const fs::path& logdir,
                           EventRunCache& cache) {
  const Document d = find_model(hub, id);
  const auto weights = stored_weights(hub, d);
  const Json graph = graph_of(hub, d, weights, logdir);
  if (!graph.at("error").is_null()) throw InvalidArgument("model " + std::to_string(id) + "'s model.json: " + graph.at("error").get<std::string>());
  const auto& layers = graph.at("layers");
  if (std::none_of(layers.begin(), layers.end(), [&](const Json& l) { return l.at("name") == layer; }))
    throw InvalidArgument("model " + std::to_string(id) + " has no layer '" + layer + "'");
  if (!weights) throw NotFound("model " + std::to_string(id) + " was saved without weights");
  std::shared_ptr<const RunEvents> events;
  if (!graph.at("run").is_null()) {
    const std::string run = graph.at("run");
    events = cache.get(run_directory(logdir, run));
  }
  Json tensors = Json::array();
  for (const auto& [name, t] : *weights) {
    if (!name.starts_with(layer + ".")) continue;
    tensors.push_back(tensor_json(name, t));
    if (!events) continue;
    if (const auto it = events->histograms.find(name); it != events->histograms.end())
      tensors.back()["history"] = history_json(graph.at("run"), name, it->second);
  }
  if (tensors.empty()) throw NotFound("layer '" + layer + "' of model " + std::to_string(id) + " has no weights");
  return {{"id", id}, {"layer", layer}, {"tensors", std::move(tensors)}, {"run", graph.at("run")},
          {"run_note", graph.at("run_note")}};
}

}  // namespace tensorhub
