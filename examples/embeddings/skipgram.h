// Skip-gram training data from WordNet's glosses, and nearest neighbours of learned vectors,
// for examples/embeddings/word_embeddings.cpp and its test.
//
// The text: Princeton WordNet 3.0 as Debian's wordnet-base ships it (/usr/share/wordnet/
// data.noun, data.verb, data.adj, data.adv; about 117,000 synsets and 1.5 million words of
// glosses). Each synset line becomes one sentence: the synset's words followed by its gloss,
// e.g. "king male monarch a male sovereign ruler of a kingdom". A gloss defines a word by the
// words nearest to it in meaning and puts synonyms side by side, so even short context windows
// carry meaning; the licence (WordNet 3.0's, BSD-like) lets anyone use it, and a Debian
// package means no download. File format: wndb(5WN), "Data File Format".
//
// The pairs follow word2vec's skip-gram (Mikolov et al. 2013, "Distributed Representations of
// Words and Phrases and their Compositionality"): each word of a sentence is a target and the
// words at most `window` positions away its contexts; frequent words are subsampled (a word
// of corpus frequency f is kept with probability min(1, sqrt(t / f) + t / f), word2vec.c's
// rule), words outside the vocabulary are dropped first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace tensorhub::examples {

/// Sentences of word indices into `words` (most frequent first) built from WordNet.
struct Corpus {
  std::vector<std::string> words;            ///< the vocabulary, by falling frequency
  std::vector<std::int64_t> counts;          ///< occurrences of each word in the whole text
  std::unordered_map<std::string, std::int32_t> index;  ///< word -> its position in `words`
  std::vector<std::vector<std::int32_t>> sentences;     ///< in-vocabulary words only
  std::int64_t total_words = 0;              ///< words in the text, in vocabulary or not
};

/// Reads WordNet's four data files under `wordnet_dir` and keeps the `vocab_size` most frequent
/// words (ties alphabetical). Words are lower case runs of a-z; a synset word such as
/// "plant_life" or "king-size" gives one word per part, and an adjective's syntactic marker
/// ("(a)", "(p)", "(ip)") is dropped. Throws std::runtime_error naming the file when one is
/// missing (install Debian's wordnet-base) or holds no synset line.
Corpus read_wordnet(const std::filesystem::path& wordnet_dir, std::size_t vocab_size);

/// (target, context) index pairs of the skip-gram model, in sentence order, after subsampling
/// with threshold `sample` (0: keep every word) drawn with `seed`; at most `max_pairs` (0: all).
struct Pairs {
  std::vector<float> targets;          ///< word indices as F32 (what the model takes as input)
  std::vector<std::int64_t> contexts;  ///< word indices as I64 (sparse categorical labels)
};
Pairs skipgram_pairs(const Corpus& corpus, int window, double sample, std::uint64_t seed,
                     std::size_t max_pairs);

/// The `k` rows of `vectors` ([rows, dim], row-major) nearest to row `query` by cosine
/// similarity, most similar first, the query itself left out; each with its similarity.
/// Rows of norm 0 have similarity 0.
std::vector<std::pair<std::int64_t, double>> nearest_by_cosine(const std::vector<float>& vectors,
                                                                std::int64_t dim, std::int64_t query,
                                                                std::size_t k);

}  // namespace tensorhub::examples
