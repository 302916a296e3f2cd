// Word embeddings learned by a skip-gram model (Embedding then Dense) from WordNet's glosses,
// trained with tensorhub's trainer and written for TensorBoard's embedding projector (and the
// dashboard's #/projector view): type "king" and the words nearest to it light up.
//
//   build/bin/word_embeddings --logdir logs/words [--vocab 5000] [--dim 64] [--epochs 3]
//   tensorboard --logdir logs/words      # PROJECTOR tab
//   tensorhub ui --logdir logs/words     # #/projector?run=train
//
// The data (skipgram.h): Debian's wordnet-base, each synset's words and gloss one sentence,
// frequent words subsampled as word2vec does, (target, context) pairs within --window words.
// The model: Embedding {input_dim: vocab, output_dim: dim} -> Dense {units: vocab} (logits)
// trained with sparse categorical cross-entropy: the full-softmax skip-gram of Mikolov et al.
// 2013 (section 2), so words that predict similar contexts get similar vectors. The
// TensorBoard callback writes the vectors every epoch (embeddings_freq 1) with the vocabulary
// as metadata; at the end the program prints the ten words nearest (cosine) to each --query.
#include <CLI/CLI.hpp>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "skipgram.h"
#include "tensorhub/core/error.h"
#include "tensorhub/train/callbacks.h"
#include "tensorhub/train/model.h"

using namespace tensorhub;
namespace fs = std::filesystem;

namespace {

struct Settings {
  std::string wordnet = "/usr/share/wordnet", logdir = "logs/words", hub;
  std::size_t vocab = 5000, max_pairs = 0;
  int dim = 64, window = 2, epochs = 3, threads = 0;
  double sample = 1e-4, learning_rate = 0.003;
  std::int64_t batch_size = 1024;
  std::uint64_t seed = 1;
  std::vector<std::string> queries{"king"};
};

nlohmann::json skipgram_config(const Settings& s, std::size_t vocab) {
  return {{"name", "skipgram"},
          {"input_shape", {1}},
          {"seed", s.seed},
          {"layers",
           {{{"type", "Embedding"}, {"name", "embedding"}, {"input_dim", vocab}, {"output_dim", s.dim}},
            {{"type", "Flatten"}},
            {{"type", "Dense"}, {"name", "context"}, {"units", vocab}}}},
          {"loss", "sparse_categorical_crossentropy"},
          {"metrics", {"accuracy"}},
          {"optimizer", {{"type", "Adam"}, {"learning_rate", s.learning_rate}}}};
}

// The vocabulary as the projector's metadata: one word per line, no header (one column). The
// callback copies it next to projector_config.pbtxt, where TensorBoard accepts it.
fs::path write_vocabulary(const fs::path& dir, const std::vector<std::string>& words) {
  fs::create_directories(dir);
  const fs::path path = dir / "vocabulary.tsv";
  std::ofstream out(path);
  for (const auto& w : words) out << w << '\n';
  if (!out) throw Unavailable("cannot write " + path.string());
  return path;
}

void print_neighbours(const examples::Corpus& corpus, const NamedTensors& weights, int dim,
                      const std::vector<std::string>& queries) {
  const Tensor& e = weights.at("embedding.weight");
  const auto* p = e.as<float>();
  const std::vector<float> vectors(p, p + e.numel());
  for (std::string q : queries) {
    for (char& c : q) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));  // the words are lower case
    auto it = corpus.index.find(q);
    if (it == corpus.index.end()) {
      std::printf("\"%s\" is not in the vocabulary (try a larger --vocab)\n", q.c_str());
      continue;
    }
    std::printf("nearest to \"%s\" (cosine):", q.c_str());
    for (const auto& [row, similarity] : examples::nearest_by_cosine(vectors, dim, it->second, 10))
      std::printf(" %s %.3f", corpus.words[static_cast<std::size_t>(row)].c_str(), similarity);
    std::printf("\n");
  }
}

int run(const Settings& s) {
  std::error_code ec;
  fs::create_directories(s.logdir, ec);  // before the minutes of reading and training
  if (ec || !fs::is_directory(s.logdir))
    throw InvalidArgument("--logdir " + s.logdir + ": cannot make a directory there" + (ec ? " (" + ec.message() + ")" : ""));
  auto t0 = std::chrono::steady_clock::now();
  const auto corpus = examples::read_wordnet(s.wordnet, s.vocab);
  const auto pairs = examples::skipgram_pairs(corpus, s.window, s.sample, s.seed, s.max_pairs);
  const auto n = static_cast<std::int64_t>(pairs.targets.size());
  std::printf("WordNet: %lld words in %zu sentences; vocabulary %zu; %lld (target, context) pairs (%.1f s)\n",
              static_cast<long long>(corpus.total_words), corpus.sentences.size(), corpus.words.size(),
              static_cast<long long>(n), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::fflush(stdout);  // before minutes of training, also when stdout is a file
  if (n == 0) throw InvalidArgument("no pairs: the vocabulary or --max-pairs is too small");

  const Tensor x = Tensor::from<float>(DType::kF32, {n, 1}, pairs.targets);
  const Tensor y = Tensor::from<std::int64_t>(DType::kI64, {n}, pairs.contexts);
  Model model = Model::from_config(skipgram_config(s, corpus.words.size()));

  const fs::path train_dir = fs::path(s.logdir) / "train";
  TensorBoardOptions tb;
  tb.log_dir = s.logdir;
  tb.embeddings_freq = 1;
  tb.embeddings_metadata = {{"embedding", write_vocabulary(s.logdir, corpus.words).string()}};
  FitOptions fit;
  fit.epochs = s.epochs;
  fit.batch_size = s.batch_size;
  fit.seed = s.seed;
  fit.callbacks.push_back(std::make_shared<TensorBoard>(tb));
  model.fit(x, y, fit);
  print_neighbours(corpus, model.weights(), s.dim, s.queries);
  std::printf("projector files under %s: tensorboard --logdir %s, or tensorhub ui --logdir %s\n",
              train_dir.c_str(), s.logdir.c_str(), s.logdir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_for_fast_blas(argv);
  Settings s;
  CLI::App app{"Skip-gram word embeddings from WordNet's glosses, written for TensorBoard's projector"};
  app.add_option("--wordnet", s.wordnet, "directory of WordNet's data.noun, data.verb, ... (Debian's wordnet-base)")
      ->capture_default_str();
  app.add_option("--logdir", s.logdir, "TensorBoard log directory")->capture_default_str();
  app.add_option("--vocab", s.vocab, "vocabulary size (most frequent words)")->capture_default_str()->check(CLI::Range(2, 100000));
  app.add_option("--dim", s.dim, "embedding dimensions")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--window", s.window, "context words on each side")->capture_default_str()->check(CLI::Range(1, 20));
  app.add_option("--sample", s.sample, "word2vec's subsampling threshold (0: keep every word)")
      ->capture_default_str()
      ->check([](const std::string& v) {
        const double t = std::strtod(v.c_str(), nullptr);
        return t >= 0 && t <= 1 ? std::string() : "--sample must be in [0, 1], e.g. 1e-4";
      });
  app.add_option("--max-pairs", s.max_pairs, "at most this many pairs (0: all)")->capture_default_str();
  app.add_option("--epochs", s.epochs, "training epochs")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--batch-size", s.batch_size, "pairs per batch")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--learning-rate", s.learning_rate, "Adam's learning rate")->capture_default_str();
  app.add_option("--seed", s.seed, "seed of the weights, the subsampling and the shuffle")->capture_default_str();
  app.add_option("--query", s.queries, "words whose nearest neighbours to print")->capture_default_str();
  app.add_option("--threads", s.threads, "libtorch threads (0: the cores)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(s.threads);
    return run(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "word_embeddings: %s\n", e.what());
    return 1;
  }
}
