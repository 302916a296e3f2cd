# tensorhub-serve-lite (src/lite/): the edge server, one static binary without libtorch, a
# database or protobuf. Included by the main build and by the arm64 cross build
# (cmake/lite-arm64/), which both call tensorhub_add_serve_lite().
#
# Its torch-free dependencies inside tensorhub: core's errors, configs, safetensors reader and
# NaN / Infinity scanner of JSON bodies (json_non_finite.cpp, which serve uses too), the HTTP
# engine of serve and ui (http_server.cpp, with bind_failure_message.cpp for its bind errors),
# the thread pool its predicts run on, and train's model.json readers of the layers
# (layer_spec.cpp) and of the serving signature (serving_signature.cpp, serve's as well), which
# need only nlohmann-json. Everything else is header-only: nlohmann-json, Eigen, CLI11 and
# Boost (Beast and Asio).
set(TENSORHUB_ROOT ${CMAKE_CURRENT_LIST_DIR}/..)
set(TENSORHUB_LITE_SOURCES
  ${TENSORHUB_ROOT}/src/lite/lite_server.cpp
  ${TENSORHUB_ROOT}/src/lite/network.cpp
  ${TENSORHUB_ROOT}/src/lite/predict_json.cpp
  ${TENSORHUB_ROOT}/src/train/layer_spec.cpp
  ${TENSORHUB_ROOT}/src/train/serving_signature.cpp)
set(TENSORHUB_LITE_CORE_SOURCES
  ${TENSORHUB_ROOT}/src/core/bind_failure_message.cpp
  ${TENSORHUB_ROOT}/src/core/config_object.cpp
  ${TENSORHUB_ROOT}/src/core/error.cpp
  ${TENSORHUB_ROOT}/src/core/http_server.cpp
  ${TENSORHUB_ROOT}/src/core/json_non_finite.cpp
  ${TENSORHUB_ROOT}/src/core/named_tensors.cpp
  ${TENSORHUB_ROOT}/src/core/thread_pool.cpp)
include(${CMAKE_CURRENT_LIST_DIR}/version.cmake)

# Adds the library tensorhub_lite (the lite sources and core's torch-free files above, compiled
# here rather than linked from tensorhub_core, whose OpenSSL and other libraries a static link
# cannot take) and the static executable tensorhub-serve-lite. Arguments: include directories
# for the header-only libraries (the main build links their targets instead).
function(tensorhub_add_serve_lite)
  add_library(tensorhub_lite STATIC ${TENSORHUB_LITE_SOURCES} ${TENSORHUB_LITE_CORE_SOURCES})
  target_include_directories(tensorhub_lite PUBLIC ${TENSORHUB_ROOT}/include ${ARGN})
  target_link_libraries(tensorhub_lite PUBLIC Threads::Threads)
  add_executable(tensorhub-serve-lite ${TENSORHUB_ROOT}/src/lite/serve_lite_main.cpp)
  target_link_libraries(tensorhub-serve-lite PRIVATE tensorhub_lite)
  target_compile_definitions(tensorhub-serve-lite PRIVATE
    TENSORHUB_VERSION="${PROJECT_VERSION}" TENSORHUB_GIT_COMMIT="${TENSORHUB_GIT_COMMIT}")
  # One static binary, stripped: copied onto a device, it runs whatever libraries the device has.
  target_link_options(tensorhub-serve-lite PRIVATE -static -s)
endfunction()
