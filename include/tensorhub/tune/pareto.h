// Several objectives at once: Pareto dominance, non-dominated sorting, crowding distance
// (Deb et al. 2002, "A Fast and Elitist Multiobjective Genetic Algorithm: NSGA-II", IEEE
// Trans. Evol. Comput. 6(2), sections III-A and III-B) and the hypervolume of a front
// (Zitzler & Thiele 1998's S metric, computed exactly by slicing one objective at a time:
// While et al. 2006, "A Faster Algorithm for Calculating Hypervolume", HSO).
//
// A point is one value per objective, in the order of `objectives`; directions are the
// objectives' own (Objective::maximize). NaN values never dominate and are always dominated.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tensorhub/tune/oracle.h"

namespace tensorhub {

/// "val_accuracy:max,predict_ms:min" -> two objectives, each parsed as Objective::parse (its
/// direction inferred where it can be). Throws InvalidArgument for an empty list, an empty
/// item, a name given twice, or what Objective::parse throws, naming the item.
std::vector<Objective> parse_objectives(const std::string& text);
/// The inverse: "val_accuracy:max,predict_ms:min".
std::string objectives_to_string(const std::vector<Objective>& objectives);

/// True when `a` is at least as good as `b` in every objective and better in one.
/// InvalidArgument if a, b and objectives differ in length.
bool dominates(const std::vector<double>& a, const std::vector<double>& b, const std::vector<Objective>& objectives);

/// Deb et al.'s fast non-dominated sort: fronts of indices into `points`, the first holding
/// the points no other dominates, each next one those dominated only by earlier fronts.
/// Indices within a front ascend. O(objectives x n^2).
std::vector<std::vector<std::size_t>> non_dominated_fronts(const std::vector<std::vector<double>>& points,
                                                           const std::vector<Objective>& objectives);

/// Deb et al.'s crowding distance of each point of one front (`front`: indices into `points`),
/// in the front's order: per objective, the boundary points get +infinity and the others the
/// gap between their neighbours divided by that objective's range, summed over objectives.
std::vector<double> crowding_distances(const std::vector<std::vector<double>>& points, const std::vector<std::size_t>& front,
                                       const std::vector<Objective>& objectives);

/// The hypervolume dominated by `points` and bounded by `reference` (one value per
/// objective; a point not strictly better than the reference in every objective adds
/// nothing): the volume of the union of the boxes between each point and the reference.
/// Exact; O(n^d) for n points of d objectives, for the fronts of a search (hundreds of points,
/// a few objectives). InvalidArgument on mismatched lengths or a non-finite reference.
double hypervolume(const std::vector<std::vector<double>>& points, const std::vector<double>& reference,
                   const std::vector<Objective>& objectives);

}  // namespace tensorhub
