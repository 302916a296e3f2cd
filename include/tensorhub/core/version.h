// The version and the commit a program was built from, for --version and bug reports. The
// build defines TENSORHUB_VERSION and TENSORHUB_GIT_COMMIT on the programs that print them
// (CMakeLists.txt, cmake/version.cmake, cmake/serve_lite.cmake); elsewhere both are "unknown".
#pragma once

#ifndef TENSORHUB_VERSION
#define TENSORHUB_VERSION "unknown"
#endif
#ifndef TENSORHUB_GIT_COMMIT
#define TENSORHUB_GIT_COMMIT "unknown"
#endif

// Internal linkage (namespace-scope constexpr): each translation unit sees its own build's
// definition, so a program built with the macros and a library without them never disagree.
namespace tensorhub {

/// "0.1.0": the project's version (CMakeLists.txt's project(VERSION)).
constexpr const char* kVersion = TENSORHUB_VERSION;
/// The commit the tree was configured at (git rev-parse --short=12 HEAD), or "unknown".
constexpr const char* kGitCommit = TENSORHUB_GIT_COMMIT;

}  // namespace tensorhub
