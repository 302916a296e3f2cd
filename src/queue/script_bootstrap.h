// The bootstrap of script tasks (script_bootstrap.py), embedded in the queue library at build
// time (cmake/embed_text.cmake), so a runner, whether `tensorhub runner` or the Python
// package's run_top_task, needs no file installed beside it: it writes the bootstrap into its
// work directory and runs `PYTHON <bootstrap> SCRIPT KEYS_JSON` (the file's docstring).
#pragma once

#include <string_view>

namespace tensorhub::detail {

/// The bytes of src/queue/script_bootstrap.py as built.
std::string_view script_bootstrap_source();

}  // namespace tensorhub::detail
