#!/usr/bin/env bash
# The package test (ctest -L package): kiln as its users get it. Installs the build into a
# temporary prefix, moves the prefix elsewhere (an installed kiln must not point back at where
# it was installed, nor at the source or build folder), builds tests/package/ against it with
# find_package(kiln), and runs it (tests/package/UseInstalledKiln.cpp): an imported ONNX model
# and an nn MLP, each compiled (the C++ compiler really runs, in an empty cache), run and
# compared with the reference evaluator. The installed kiln-run compiles the ONNX model too. Where the system allows a private mount namespace
# (unshare -rm), both run with the source and build folders hidden under empty mounts, so that
# a file kiln reads from either at run time fails the test.
#
# Usage: run-package-test.sh CMAKE SOURCE_DIR BUILD_DIR GENERATOR CXX_COMPILER
set -euo pipefail
cmake="$1" source="$2" build="$3" generator="$4" cxx="$5"

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-package-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$cmake" --install "$build" --prefix "$work/installed" >/dev/null
mv "$work/installed" "$work/prefix"
prefix="$work/prefix"

# The installed text (headers, CMake files) names neither folder.
if leaks=$(grep -rIlF -e "$source" -e "$build" "$prefix"); then
  echo "run-package-test: installed files name the source or build folder:" >&2
  echo "$leaks" >&2
  exit 1
fi

"$cmake" -S "$source/tests/package" -B "$work/consumer" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
found=$(sed -n 's/^kiln_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")
if [ "$found" != "$prefix/lib/cmake/kiln" ] && [ "$found" != "$prefix/lib64/cmake/kiln" ]; then
  echo "run-package-test: find_package(kiln) found $found, not the installed copy in $prefix" >&2
  exit 1
fi
"$cmake" --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

cp "$source/tests/golden/onnx/conv-relu-pool.onnx" "$work/model.onnx"
cat >"$work/run.sh" <<RUN
set -e
"$work/consumer/use_installed_kiln" "$work/model.onnx" "$work/cache-consumer"
KILN_CACHE_DIR="$work/cache-tool" "$prefix/bin/kiln-run" "$work/model.onnx"
RUN
# The build folder first: it may lie inside the source folder.
hide='for dir in "$1" "$2"; do if [ -d "$dir" ]; then mount -t tmpfs none "$dir"; fi; done; exec bash "$3"'
case "$work/" in "$source"/* | "$build"/*) hidable=no ;; *) hidable=yes ;; esac # TMPDIR inside them
if [ "$hidable" = yes ] && unshare -rm true 2>/dev/null; then
  echo "run-package-test: running with $build and $source hidden"
  unshare -rm bash -c "$hide" hide "$build" "$source" "$work/run.sh"
else
  echo "run-package-test: cannot hide the source and build folders here (no private mount namespace, or TMPDIR inside them); running with them in place"
  bash "$work/run.sh"
fi
echo "run-package-test: ok"
