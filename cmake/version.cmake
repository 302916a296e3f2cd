# TENSORHUB_GIT_COMMIT: the commit the tree was configured at (git rev-parse --short=12 HEAD),
# "unknown" for a tree without .git (a tarball) or without git. Baked in at configure time:
# `tensorhub --version` and `tensorhub-serve-lite --version` print it.
if(NOT DEFINED TENSORHUB_GIT_COMMIT)
  execute_process(COMMAND git -C ${CMAKE_CURRENT_LIST_DIR}/.. rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE TENSORHUB_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE tensorhub_git_rc ERROR_QUIET)
  if(NOT tensorhub_git_rc EQUAL 0 OR TENSORHUB_GIT_COMMIT STREQUAL "")
    set(TENSORHUB_GIT_COMMIT unknown)
  endif()
endif()
