// Looks up the embedded files (their bytes: the generated ui_assets.cpp).
#include "assets.h"

namespace tensorhub {

const EmbeddedFile* find_embedded_file(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const auto& f : embedded_files())
    if (f.path == path) return &f;
  return nullptr;
}

}  // namespace tensorhub
