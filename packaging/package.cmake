# The Debian package (scripts/package -> build/package/tensorhub_<version>_amd64.deb), CPack's
# DEB generator: the binaries, examples and docs, systemd units for the model server, runners
# and the dashboard, their configuration in /etc/tensorhub, and maintainer scripts that make
# the unprivileged user `tensorhub` (postinst) and remove it and the configuration on purge
# (postrm), keeping /var/lib/tensorhub, the data the services made.
# Runtime dependencies are computed from the binaries by dpkg-shlibdeps (dpkg-dev).
set(pkg ${CMAKE_CURRENT_LIST_DIR})

# `install` and cpack build only what scripts/package builds first, not every test and bench.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
install(TARGETS tensorhub tensorhub-torch tensorhub-serve-lite RUNTIME DESTINATION bin)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/ DESTINATION share/tensorhub/examples)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/tensorhub)
# The Python package for Debian's python3 (the module is built against it: python/CMakeLists.txt),
# where Debian's own python3-* packages live.
if(TARGET tensorhub_python_core)
  set(pkg_python_dir lib/python3/dist-packages/tensorhub)
  install(TARGETS tensorhub_python_core LIBRARY DESTINATION ${pkg_python_dir})
  file(GLOB pkg_python_files ${CMAKE_SOURCE_DIR}/python/tensorhub/*.py ${CMAKE_SOURCE_DIR}/python/tensorhub/*.pyi
                             ${CMAKE_SOURCE_DIR}/python/tensorhub/py.typed)
  install(FILES ${pkg_python_files} DESTINATION ${pkg_python_dir})
endif()
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION share/doc/tensorhub/docs)
install(FILES ${pkg}/systemd/tensorhub-serve.service ${pkg}/systemd/tensorhub-runner@.service
              ${pkg}/systemd/tensorhub-ui.service
        DESTINATION lib/systemd/system)
install(FILES ${pkg}/etc/serve.env ${pkg}/etc/ui.env ${pkg}/etc/runner.env.example
        DESTINATION /etc/tensorhub PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tensorhub)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "training hub: datasets, models, a task queue and runners in one database; a TF Serving-compatible model server")
set(CPACK_PACKAGE_DESCRIPTION "tensorhub keeps datasets, models, training logs and a task queue in one SQLite or PostgreSQL database; runners on any number of machines claim training tasks and store models back; `tensorhub serve` answers TensorFlow Serving's REST and gRPC APIs, and tensorhub-serve-lite (static, no libtorch) its REST predict API on small devices. Services: tensorhub-serve, tensorhub-runner@<task name>, tensorhub-ui.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # tensorhub_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "tensorhub developers <tensorhub@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# adduser: the maintainer scripts'; python3 and numpy: the Python module's (an extension built for
# Debian 12's Python 3.11, which imports numpy); the rest is computed.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, python3 (>= 3.11), python3 (<< 3.12), python3-numpy")
# libtorch calls libblas.so.3, which Debian's reference BLAS also provides (about 7x slower to train).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-openmp")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${pkg}/debian/postinst ${pkg}/debian/prerm ${pkg}/debian/postrm
                                       ${pkg}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
