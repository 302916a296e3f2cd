// The dashboard's static files, embedded in the binary at build time: CMake turns ui/*.html,
// ui/*.js, ui/*.css and uPlot's files from ui/node_modules into byte arrays
// (cmake/embed_files.cmake writes build/ui_assets.cpp), so `tensorhub ui` needs no network
// and no files beside the binary.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace tensorhub {

/// One embedded file.
struct EmbeddedFile {
  std::string_view path;          ///< URL path, e.g. "/app.js" ("/index.html" for the page)
  std::string_view content_type;  ///< e.g. "text/javascript; charset=utf-8"
  std::span<const unsigned char> bytes;
};

/// Every embedded file, in no particular order.
std::span<const EmbeddedFile> embedded_files();

/// The file served at `path` ("/" is "/index.html"), or nullptr.
const EmbeddedFile* find_embedded_file(std::string_view path);

}  // namespace tensorhub
