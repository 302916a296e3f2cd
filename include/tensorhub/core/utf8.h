// UTF-8 validation, for text that must be UTF-8 before it is stored or run (a script task's
// source, which PostgreSQL's TEXT and Python both read as UTF-8).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace tensorhub {

/// The byte offset of the first byte of `text` that does not begin a well-formed UTF-8
/// sequence, or nothing when all of `text` is well-formed UTF-8. Well-formed as the Unicode
/// Standard (chapter 3, table 3-7) defines it: no overlong forms, no surrogates (U+D800 to
/// U+DFFF), nothing above U+10FFFF, no truncated sequence. NUL bytes are well-formed.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace tensorhub
