# Cross-compiling for 64-bit ARM (arm64) with Debian's crossbuild-essential-arm64
# (aarch64-linux-gnu-gcc/g++, the arm64 libc in /usr/aarch64-linux-gnu).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
# Programs from this machine; libraries and headers only from the arm64 root.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Run arm64 test programs under Debian's qemu-user-static where CMake asks for an emulator.
find_program(TENSORHUB_QEMU_AARCH64 qemu-aarch64-static)
if(TENSORHUB_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TENSORHUB_QEMU_AARCH64})
endif()
