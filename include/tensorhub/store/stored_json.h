// The JSON text the backends store in their JSON columns (tags, results, hyperparameters,
// specs): non-finite numbers are encoded on the way in and decoded on the way out here and
// nowhere else (see encode_non_finite in document.h), so both backends keep NaN and +/-Inf
// and their SQL can sort and filter them (query.h maps {"$numberDouble": ...} to numbers).
#pragma once

#include <string>

#include "tensorhub/store/document.h"

namespace tensorhub {

/// The text to store for `value`: its JSON with non-finite numbers in Extended JSON form.
std::string to_stored_json(const Json& value);

/// Parses stored JSON text and decodes non-finite numbers. Throws DataLoss naming `column`
/// if the text is not JSON.
Json from_stored_json(const std::string& text, const char* column);

}  // namespace tensorhub
