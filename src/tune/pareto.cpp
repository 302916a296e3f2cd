// Pareto dominance, NSGA-II's sorting and crowding, and the hypervolume (tune/pareto.h).
#include "tensorhub/tune/pareto.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "tensorhub/core/error.h"

namespace tensorhub {
namespace {

void check_lengths(std::size_t a, std::size_t b, std::size_t objectives) {
  if (a != objectives || b != objectives)
    throw InvalidArgument("pareto: points of " + std::to_string(a) + " and " + std::to_string(b) + " values for " +
                          std::to_string(objectives) + " objectives");
}

// The values as all minimised (a maximised objective negated), so that the hypervolume has one
// direction to slice in.
std::vector<double> minimised(const std::vector<double>& p, const std::vector<Objective>& objectives) {
  std::vector<double> out(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) out[i] = objectives[i].maximize ? -p[i] : p[i];
  return out;
}

// HSO: slices along the last objective; each slice's volume is the hypervolume of the points
// below it in the remaining objectives. `points` are minimised and strictly below `ref`.
double hso(std::vector<std::vector<double>> points, const std::vector<double>& ref, std::size_t d) {
  if (points.empty()) return 0;
  if (d == 1) {
    double best = ref[0];
    for (const auto& p : points) best = std::min(best, p[0]);
    return ref[0] - best;
  }
  const std::size_t last = d - 1;
  std::sort(points.begin(), points.end(), [last](const auto& a, const auto& b) { return a[last] < b[last]; });
  double volume = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double top = i + 1 < points.size() ? points[i + 1][last] : ref[last];
    const double height = top - points[i][last];
    if (height <= 0) continue;
    std::vector<std::vector<double>> below(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(i + 1));
    volume += height * hso(std::move(below), ref, d - 1);
  }
  return volume;
}

}  // namespace

std::vector<Objective> parse_objectives(const std::string& text) {
  std::vector<Objective> out;
  std::set<std::string> names;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InvalidArgument("objectives '" + text + "': an empty item; example: val_accuracy:max,predict_ms:min");
    Objective o = Objective::parse(item);
    if (!names.insert(o.name).second) throw InvalidArgument("objectives '" + text + "': " + o.name + " is given twice");
    out.push_back(std::move(o));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string objectives_to_string(const std::vector<Objective>& objectives) {
  std::string out;
  for (const auto& o : objectives) out += (out.empty() ? "" : ",") + o.to_string();
  return out;
}

bool dominates(const std::vector<double>& a, const std::vector<double>& b, const std::vector<Objective>& objectives) {
  check_lengths(a.size(), b.size(), objectives.size());
  bool strictly = false;
  for (std::size_t i = 0; i < objectives.size(); ++i) {
    if (std::isnan(a[i])) return false;
    if (objectives[i].better(b[i], a[i])) return false;
    strictly |= objectives[i].better(a[i], b[i]);
  }
  return strictly;
}

std::vector<std::vector<std::size_t>> non_dominated_fronts(const std::vector<std::vector<double>>& points,
                                                           const std::vector<Objective>& objectives) {
  const std::size_t n = points.size();
  std::vector<std::vector<std::size_t>> dominated_by(n);  // S_p: the points p dominates
  std::vector<int> count(n, 0);                          // n_p: how many dominate p
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = p + 1; q < n; ++q) {
      if (dominates(points[p], points[q], objectives)) {
        dominated_by[p].push_back(q);
        ++count[q];
      } else if (dominates(points[q], points[p], objectives)) {
        dominated_by[q].push_back(p);
        ++count[p];
      }
    }
  std::vector<std::vector<std::size_t>> fronts;
  std::vector<std::size_t> current;
  for (std::size_t p = 0; p < n; ++p)
    if (count[p] == 0) current.push_back(p);
  while (!current.empty()) {
    std::vector<std::size_t> next;
    for (std::size_t p : current)
      for (std::size_t q : dominated_by[p])
        if (--count[q] == 0) next.push_back(q);
    std::sort(next.begin(), next.end());
    fronts.push_back(std::move(current));
    current = std::move(next);
  }
  return fronts;
}

std::vector<double> crowding_distances(const std::vector<std::vector<double>>& points, const std::vector<std::size_t>& front,
                                       const std::vector<Objective>& objectives) {
  const std::size_t n = front.size();
  std::vector<double> distance(n, 0);
  if (n <= 2) return std::vector<double>(n, std::numeric_limits<double>::infinity());
  std::vector<std::size_t> order(n);
  for (std::size_t m = 0; m < objectives.size(); ++m) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return points[front[a]][m] < points[front[b]][m]; });
    const double lo = points[front[order.front()]][m], hi = points[front[order.back()]][m];
    distance[order.front()] = distance[order.back()] = std::numeric_limits<double>::infinity();
    if (!(hi > lo)) continue;  // every point equal in this objective: it separates none
    for (std::size_t k = 1; k + 1 < n; ++k)
      distance[order[k]] += (points[front[order[k + 1]]][m] - points[front[order[k - 1]]][m]) / (hi - lo);
  }
  return distance;
}

double hypervolume(const std::vector<std::vector<double>>& points, const std::vector<double>& reference,
                   const std::vector<Objective>& objectives) {
  const std::size_t d = objectives.size();
  if (reference.size() != d || d == 0)
    throw InvalidArgument("hypervolume: a reference of " + std::to_string(reference.size()) + " values for " +
                          std::to_string(d) + " objectives");
  for (double r : reference)
    if (!std::isfinite(r)) throw InvalidArgument("hypervolume: the reference point must be finite");
  const std::vector<double> ref = minimised(reference, objectives);
  std::vector<std::vector<double>> inside;
  for (const auto& p : points) {
    check_lengths(p.size(), d, d);
    std::vector<double> q = minimised(p, objectives);
    bool below = true;
    for (std::size_t i = 0; i < d; ++i) below &= q[i] < ref[i];  // false for NaN too
    if (below) inside.push_back(std::move(q));
  }
  return hso(std::move(inside), ref, d);
}

}  // namespace tensorhub
