# Cross build for 64-bit Arm Linux (the NEON kernels), tests run under user-mode emulation:
#   apt-get install g++-aarch64-linux-gnu qemu-user
#   cmake -S . -B build/arm -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DVECGRAPH_BUILD_PYTHON=OFF
#   cmake --build build/arm && ctest --test-dir build/arm
# ctest runs each test binary through CMAKE_CROSSCOMPILING_EMULATOR; test_kernels prints
# "active ISA: neon" and checks the NEON table against the serial one.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
