// examples/embeddings/word_embeddings as a real process on Debian's WordNet (wordnet-base): a
// small run, checked for two properties a skip-gram model must have whatever its random
// start, computed here from the same (target, context) pairs, not for lucky neighbours:
//  1. It uses its input: the final training loss is below the entropy of the contexts' unigram
//     distribution, the least loss a model that ignores the target word can reach.
//  2. Its vectors encode distributional similarity (Levy & Goldberg 2014, "Neural Word
//     Embedding as Implicit Matrix Factorization": skip-gram factorises a shifted PMI matrix):
//     over all pairs of vocabulary words, the cosine of their learned vectors correlates with
//     the cosine of their rows of the positive PMI matrix of the pairs. Random vectors of the
//     same size, the control, correlate with it near zero.
// The projector files it writes must also read back as TensorBoard's projector reads them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "process_util.h"
#include "skipgram.h"
#include "tensorhub/summary/event_file_reader.h"
#include "tensorhub/summary/projector.h"
#include "test_util.h"

namespace tensorhub {
namespace {

using namespace testing;

const std::filesystem::path kWordnet = "/usr/share/wordnet";
constexpr std::size_t kVocab = 300;
constexpr int kDim = 16;
constexpr std::size_t kPairs = 150000;

// Pearson correlation of x and y.
double correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

double cosine(const double* a, const double* b, std::size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < n; ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

// Cosines of every pair (a < b) of rows of `m` ([rows, cols] row-major).
std::vector<double> pair_cosines(const std::vector<double>& m, std::size_t rows, std::size_t cols) {
  std::vector<double> out;
  for (std::size_t a = 0; a < rows; ++a)
    for (std::size_t b = a + 1; b < rows; ++b) out.push_back(cosine(&m[a * cols], &m[b * cols], cols));
  return out;
}

// Positive PMI of the (target, context) counts: max(0, log(P(t, c) / (P(t) P(c)))).
std::vector<double> positive_pmi(const examples::Pairs& p, std::size_t v) {
  std::vector<double> joint(v * v, 0), target(v, 0), context(v, 0);
  for (std::size_t i = 0; i < p.targets.size(); ++i) {
    const auto t = static_cast<std::size_t>(p.targets[i]), c = static_cast<std::size_t>(p.contexts[i]);
    joint[t * v + c] += 1, target[t] += 1, context[c] += 1;
  }
  const double n = static_cast<double>(p.targets.size());
  for (std::size_t t = 0; t < v; ++t)
    for (std::size_t c = 0; c < v; ++c) {
      double& j = joint[t * v + c];
      j = j > 0 ? std::max(0.0, std::log(j * n / (target[t] * context[c]))) : 0.0;
    }
  return joint;
}

TEST(WordEmbeddingsExample, LearnsFromItsInputAndItsVectorsFollowDistributionalSimilarity) {
  if (!std::filesystem::exists(kWordnet / "data.noun"))
    GTEST_SKIP() << "no WordNet at " << kWordnet << " (scripts/setup --test installs wordnet-base)";
  TempDir dir;
  const auto logdir = dir.path() / "words";
  const auto log = (dir.path() / "out.log").string();
  ASSERT_EQ(wait_exit(spawn({std::string(TENSORHUB_BIN_DIR) + "/word_embeddings", "--vocab", std::to_string(kVocab),
                             "--dim", std::to_string(kDim), "--max-pairs", std::to_string(kPairs), "--epochs", "3",
                             "--batch-size", "256", "--learning-rate", "0.01", "--seed", "7", "--threads", "1",
                             "--logdir", logdir.string()},
                            log)), 0) << read_text(log);

  // The same pairs the program trained on (same vocabulary, window, subsampling and seed).
  const auto corpus = examples::read_wordnet(kWordnet, kVocab);
  const auto pairs = examples::skipgram_pairs(corpus, 2, 1e-4, 7, kPairs);
  ASSERT_EQ(pairs.targets.size(), kPairs);

  // 1. The final epoch's loss against the contexts' unigram entropy (nats).
  std::vector<double> freq(kVocab, 0);
  for (auto c : pairs.contexts) freq[static_cast<std::size_t>(c)] += 1.0 / kPairs;
  double entropy = 0;
  for (double f : freq)
    if (f > 0) entropy -= f * std::log(f);
  const auto train = read_run_events(logdir / "train");
  ASSERT_TRUE(train.scalars.contains("epoch_loss"));
  const double loss = train.scalars.at("epoch_loss").back().value;
  EXPECT_LT(loss, entropy - 0.1) << "unigram entropy " << entropy;

  // 2. The projector's vectors (what TensorBoard shows) against the PPMI rows.
  const auto embeddings = read_projector(logdir / "train" / kProjectorConfigFile);
  ASSERT_EQ(embeddings.size(), 1u);
  const auto& e = embeddings[0];
  ASSERT_EQ(e.tensor.rows, static_cast<std::int64_t>(kVocab));
  ASSERT_EQ(e.tensor.cols, kDim);
  ASSERT_TRUE(e.metadata);
  ASSERT_EQ(e.metadata->rows.size(), kVocab);
  for (std::size_t i = 0; i < kVocab; ++i) ASSERT_EQ(e.metadata->rows[i][0], corpus.words[i]) << "row " << i;

  const std::vector<double> learned(e.tensor.values.begin(), e.tensor.values.end());
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  std::vector<double> random(kVocab * kDim);
  for (double& r : random) r = normal(rng);
  const auto reference = pair_cosines(positive_pmi(pairs, kVocab), kVocab, kVocab);
  const double r_learned = correlation(pair_cosines(learned, kVocab, kDim), reference);
  const double r_random = correlation(pair_cosines(random, kVocab, kDim), reference);
  std::printf("loss %.3f vs unigram entropy %.3f; correlation with PPMI cosines: learned %.3f, random %.3f\n",
              loss, entropy, r_learned, r_random);
  EXPECT_GT(r_learned, 0.3) << "control (random vectors): " << r_random;
  EXPECT_LT(std::abs(r_random), 0.05);
}

}  // namespace
}  // namespace tensorhub
