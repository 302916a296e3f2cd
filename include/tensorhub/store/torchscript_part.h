// The TorchScript part of a hub model: a PyTorch module compiled by torch.jit.script or
// torch.jit.trace and written by torch.jit.save, stored as the model part "model.pt" beside
// (or instead of) model.json and weights.safetensors. Written by the Python package's
// TensorHub.save_model and by `tensorhub model save --path FILE.pt`; served by `tensorhub
// serve --hub_model` (serve/hub_source.cpp) and written back out by `tensorhub model fetch`.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

namespace tensorhub {

/// The name of the part (and of the file in a version directory) holding the TorchScript bytes.
inline constexpr const char* kTorchScriptPart = "model.pt";

/// The architecture (model.json) of a model that is only TorchScript, as `tensorhub model save
/// --path FILE.pt` stores it: {"format": "torchscript"}.
inline constexpr const char* kTorchScriptFormat = "torchscript";

/// The "format" key of a stored model's architecture: "torchscript" (kTorchScriptFormat), or the
/// Python package's "pytorch_state_dict" and "named_tensors" (TensorHub.save_model); "" for a
/// model.json of tensorhub layers, which has none, and for an architecture that is not an
/// object or whose format is not a string.
inline std::string model_format(const nlohmann::json& architecture) {
  if (!architecture.is_object()) return "";
  const auto it = architecture.find("format");
  return it != architecture.end() && it->is_string() ? it->get<std::string>() : "";
}

/// True when `bytes` start as a zip archive does ("PK\x03\x04", the local file header of
/// PKWARE's APPNOTE.TXT, 4.3.7), as every file torch.jit.save writes since PyTorch 1.4. A
/// check of the first four bytes that turns away other files with a clear message; libtorch's
/// reader checks the rest when the module is loaded.
inline bool is_zip_archive(std::span<const std::byte> bytes) {
  static constexpr char kMagic[] = {'P', 'K', '\x03', '\x04'};
  return bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0;
}

}  // namespace tensorhub
