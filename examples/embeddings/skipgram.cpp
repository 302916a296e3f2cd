#include "skipgram.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

namespace tensorhub::examples {
namespace {

// Appends the a-z runs of `text`, lower-cased, to `out`.
void append_words(const std::string& text, std::vector<std::string>& out) {
  std::string word;
  for (char c : text) {
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower >= 'a' && lower <= 'z') {
      word += lower;
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
}

// One synset line of a wndb(5WN) data file as words: "synset_offset lex_filenum ss_type w_cnt
// word lex_id [word lex_id...] p_cnt [ptr...] [frames...] | gloss". w_cnt is two hex digits.
// Returns false for the licence lines at the top of each file (they start with two spaces).
bool synset_words(const std::string& line, std::vector<std::string>& out) {
  if (line.empty() || line[0] == ' ') return false;
  const auto bar = line.find(" | ");
  std::istringstream fields(line.substr(0, bar));
  std::string offset, lex_filenum, ss_type, w_cnt;
  if (!(fields >> offset >> lex_filenum >> ss_type >> w_cnt)) return false;
  char* end = nullptr;
  const unsigned long n = std::strtoul(w_cnt.c_str(), &end, 16);
  if (w_cnt.empty() || *end != '\0') throw std::runtime_error("w_cnt \"" + w_cnt + "\" is not a hex number");
  for (unsigned long i = 0; i < n; ++i) {
    std::string word, lex_id;
    if (!(fields >> word >> lex_id)) return false;
    word = word.substr(0, word.find('('));  // an adjective's marker: "galore(ip)"
    append_words(word, out);                // "plant_life" -> plant life
  }
  if (bar != std::string::npos) append_words(line.substr(bar + 3), out);
  return true;
}

std::vector<std::vector<std::string>> read_sentences(const std::filesystem::path& dir) {
  std::vector<std::vector<std::string>> sentences;
  for (const char* name : {"data.noun", "data.verb", "data.adj", "data.adv"}) {
    const auto path = dir / name;
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path.string() + " (install Debian's wordnet-base, or pass --wordnet DIR)");
    std::size_t before = sentences.size();
    std::string line;
    std::vector<std::string> words;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      words.clear();
      try {
        if (synset_words(line, words) && !words.empty()) sentences.push_back(words);
      } catch (const std::exception& e) {
        throw std::runtime_error(path.string() + ":" + std::to_string(number) +
                                 ": not a WordNet synset line (wndb(5WN)): " + e.what());
      }
    }
    if (sentences.size() == before) throw std::runtime_error(path.string() + " holds no WordNet synset line");
  }
  return sentences;
}

}  // namespace

Corpus read_wordnet(const std::filesystem::path& wordnet_dir, std::size_t vocab_size) {
  const auto text = read_sentences(wordnet_dir);
  std::unordered_map<std::string, std::int64_t> freq;
  Corpus c;
  for (const auto& s : text)
    for (const auto& w : s) ++freq[w], ++c.total_words;
  std::vector<std::pair<std::string, std::int64_t>> ranked(freq.begin(), freq.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  ranked.resize(std::min(vocab_size, ranked.size()));
  for (const auto& [word, count] : ranked) {
    c.index.emplace(word, static_cast<std::int32_t>(c.words.size()));
    c.words.push_back(word);
    c.counts.push_back(count);
  }
  for (const auto& s : text) {
    std::vector<std::int32_t> ids;
    for (const auto& w : s)
      if (auto it = c.index.find(w); it != c.index.end()) ids.push_back(it->second);
    if (ids.size() > 1) c.sentences.push_back(std::move(ids));
  }
  return c;
}

Pairs skipgram_pairs(const Corpus& corpus, int window, double sample, std::uint64_t seed, std::size_t max_pairs) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> keep(corpus.words.size(), 1.0);
  if (sample > 0)
    for (std::size_t i = 0; i < keep.size(); ++i) {
      const double r = sample * static_cast<double>(corpus.total_words) / static_cast<double>(corpus.counts[i]);
      keep[i] = std::min(1.0, std::sqrt(r) + r);
    }
  Pairs p;
  std::vector<std::int32_t> kept;
  for (const auto& sentence : corpus.sentences) {
    kept.clear();
    for (auto w : sentence)
      if (keep[w] >= 1.0 || uniform(rng) < keep[w]) kept.push_back(w);
    const auto n = static_cast<std::ptrdiff_t>(kept.size());
    for (std::ptrdiff_t i = 0; i < n; ++i)
      for (std::ptrdiff_t j = std::max<std::ptrdiff_t>(0, i - window); j <= std::min(n - 1, i + window); ++j) {
        if (j == i) continue;
        if (max_pairs && p.targets.size() == max_pairs) return p;
        p.targets.push_back(static_cast<float>(kept[i]));
        p.contexts.push_back(kept[j]);
      }
  }
  return p;
}

std::vector<std::pair<std::int64_t, double>> nearest_by_cosine(const std::vector<float>& vectors, std::int64_t dim,
                                                               std::int64_t query, std::size_t k) {
  const std::int64_t rows = static_cast<std::int64_t>(vectors.size()) / dim;
  if (dim <= 0 || query < 0 || query >= rows) throw std::out_of_range("nearest_by_cosine: no row " + std::to_string(query));
  auto norm = [&](std::int64_t r) {
    double s = 0;
    for (std::int64_t d = 0; d < dim; ++d) s += double(vectors[r * dim + d]) * vectors[r * dim + d];
    return std::sqrt(s);
  };
  const double qn = norm(query);
  std::vector<std::pair<std::int64_t, double>> all;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r == query) continue;
    double dot = 0;
    for (std::int64_t d = 0; d < dim; ++d) dot += double(vectors[query * dim + d]) * vectors[r * dim + d];
    const double denom = qn * norm(r);
    all.emplace_back(r, denom > 0 ? dot / denom : 0.0);
  }
  k = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(),
                    [](const auto& a, const auto& b) { return a.second > b.second; });
  all.resize(k);
  return all;
}

}  // namespace tensorhub::examples
