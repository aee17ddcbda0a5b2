#!/usr/bin/env bash
# Collects what a Strata build tree needs to run on a machine that has none of Debian's packages
# (the GPU machine: glibc, libstdc++ and CUDA, but no spdlog, Boost, OpenBLAS or toml++):
#   bin/strata (and any other program in BUILD_DIR/bin and BUILD_DIR/bench), the test programs,
#   lib/strata/plugins/*.so (found beside bin/strata as an installed tree's are), the test fixture
#   plugins, and lib/: every shared library those link except glibc's, libstdc++, libgcc_s and
#   CUDA's (driver, cudart, cuBLAS, NCCL: the GPU machine has its own, under /usr/local/cuda or in
#   the PyTorch wheels' nvidia/*/lib; NCCL alone is 218 MB).
# Every copy is stripped. The bundle is packed into OUT_DIR/payload.tar.xz (OpenBLAS alone is
# 35 MiB raw, 4 MiB packed) beside env.sh, which unpacks it the first time it is sourced, and
# run-tests.sh, which runs the test programs directly (CTest's files hold this machine's paths).
#
# usage: scripts/device-bundle.sh [--no-pack] BUILD_DIR OUT_DIR [TEST_PROGRAM...]
#   TEST_PROGRAM: a name in BUILD_DIR/tests or a path; default: every program in BUILD_DIR/tests
#   --no-pack: leave bin/, lib/ and tests/ unpacked
# OUT_DIR is replaced; it must be new or a bundle this script made. Then, on the GPU machine:
#   source OUT_DIR/env.sh && strata ...     or     bash OUT_DIR/run-tests.sh --gtest_filter='Cuda*'
set -euo pipefail

pack=1
if [ "${1:-}" = "--no-pack" ]; then
  pack=0
  shift
fi
if [ $# -lt 2 ]; then
  sed -n '13,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "device-bundle: BUILD_DIR '$1' is not a directory" >&2; exit 2; }
out=$2
shift 2
[ -x "$build/bin/strata" ] || { echo "device-bundle: '$build/bin/strata' is missing: build first" >&2; exit 2; }
for tool in ldd strip objdump tar xz; do
  command -v "$tool" >/dev/null || { echo "device-bundle: needs '$tool' on PATH" >&2; exit 2; }
done

marker=.strata-device-bundle
if [ -e "$out" ]; then
  [ -f "$out/$marker" ] || { echo "device-bundle: '$out' exists and is not a bundle; refusing to replace it" >&2; exit 2; }
  rm -rf "$out"
fi
mkdir -p "$out"/{bin,lib/strata/plugins,tests/fixture_plugins,tests/probe_fixtures}
out=$(cd "$out" && pwd)
touch "$out/$marker"

is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

# copy_stripped SOURCE DEST_DIR [NAME]: a stripped copy, symlinks followed.
copy_stripped() {
  local dest="$2/${3:-$(basename "$1")}"
  cp -L "$1" "$dest"
  chmod u+w "$dest"
  strip --strip-unneeded "$dest"
}

programs=()
for file in "$build"/bin/* "$build"/bench/*; do
  if is_elf "$file" && [ -x "$file" ]; then
    copy_stripped "$file" "$out/bin"
    programs+=("$out/bin/$(basename "$file")")
  fi
done
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  # tests/CMakeLists.txt puts its programs directly in BUILD_DIR/tests (beside them: run folders).
  for file in "$build"/tests/*; do
    if is_elf "$file" && [ -x "$file" ]; then tests+=("$file"); fi
  done
fi
for test in "${tests[@]}"; do
  [ -e "$test" ] || test="$build/tests/$test"
  is_elf "$test" || { echo "device-bundle: test program '$test' is not an ELF file" >&2; exit 2; }
  copy_stripped "$test" "$out/tests"
  programs+=("$out/tests/$(basename "$test")")
done
for plugin in "$build"/plugins/*.so "$build"/tests/fixture_plugins/*.so "$build"/tests/probe_fixtures/*.so; do
  [ -e "$plugin" ] || continue
  case $plugin in
    */fixture_plugins/*) dest="$out/tests/fixture_plugins" ;;
    */probe_fixtures/*) dest="$out/tests/probe_fixtures" ;;
    *) dest="$out/lib/strata/plugins" ;;
  esac
  copy_stripped "$plugin" "$dest"
  programs+=("$dest/$(basename "$plugin")")
done

# What the GPU machine provides: the C runtime, the GCC runtime, the CUDA driver and toolkit.
provided='^(linux-vdso|linux-gate|ld-linux[^ ]*|libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|libanl|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnvrtc[^ ]*|libnvJitLink|libcurand|libcufft|libcusparse|libcusolver|libnccl|libnvidia-[^ ]*)\.so'
missing=()
declare -A libraries=()
for program in "${programs[@]}"; do
  # ldd lists the whole closure, so the libraries' own needs come with their users'.
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [[ "$name" =~ $provided ]]; then continue; fi
    if [ "$path" = "not" ]; then
      missing+=("$name (needed by $(basename "$program"))")
    else
      libraries[$name]=$path
    fi
  done < <(ldd "$program" 2>/dev/null || true)
done
if [ ${#missing[@]} -gt 0 ]; then
  printf 'device-bundle: not found on this machine: %s\n' "${missing[@]}" >&2
  exit 1
fi
for name in "${!libraries[@]}"; do copy_stripped "${libraries[$name]}" "$out/lib" "$name"; done

# The newest glibc and libstdc++ symbol versions the bundle needs from the GPU machine.
newest() {
  find "$out/bin" "$out/lib" "$out/tests" -type f -name '*' -exec objdump -T {} + 2>/dev/null |
    grep -o "$1_[0-9.]*[0-9]" | sed "s/^$1_//" | sort -uV | tail -1
}
glibc=$(newest GLIBC)
glibcxx=$(newest GLIBCXX)

source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
{
  echo "# Written by scripts/device-bundle.sh; read by env.sh and run-tests.sh."
  echo "STRATA_BUNDLE_SOURCE_DIR='$source_dir'"
  echo "STRATA_BUNDLE_BUILD_DIR='$build'"
  echo "STRATA_BUNDLE_COMMIT='$(git -C "${source_dir:-.}" rev-parse --short HEAD 2>/dev/null || echo unknown)'"
  echo "STRATA_BUNDLE_NEEDS_GLIBC='$glibc'"
  echo "STRATA_BUNDLE_NEEDS_GLIBCXX='$glibcxx'"
} > "$out/build-info.sh"

cat > "$out/env.sh" <<'ENV'
# Source from bash: puts the bundle's strata on PATH, its libraries and cuBLAS's on
# LD_LIBRARY_PATH and its plugins on STRATA_PLUGIN_PATH. Unpacks payload.tar.xz on first use.
STRATA_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export STRATA_BUNDLE
. "$STRATA_BUNDLE/build-info.sh"
if [ ! -x "$STRATA_BUNDLE/bin/strata" ] && [ -f "$STRATA_BUNDLE/payload.tar.xz" ]; then
  if command -v xz >/dev/null; then
    tar -xJf "$STRATA_BUNDLE/payload.tar.xz" -C "$STRATA_BUNDLE"
  else
    python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
      "$STRATA_BUNDLE/payload.tar.xz" "$STRATA_BUNDLE"
  fi
fi
strata_library_path="$STRATA_BUNDLE/lib"
for strata_dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$strata_dir" ] && strata_library_path="$strata_library_path:$strata_dir"
done
# cuBLAS, cudart and NCCL from pip (nvidia/cublas/lib, nvidia/nccl/lib, or nvidia/cu13/lib for CUDA 13's wheels).
if command -v python3 >/dev/null; then
  strata_dir=$(python3 -c 'import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
print(":".join(d for base in nvidia.__path__ for d in sorted(glob.glob(os.path.join(base, "*", "lib")))
               if any(glob.glob(os.path.join(d, name + "*.so*")) for name in ("libcublas", "libcudart", "libnccl"))))' \
    2>/dev/null || true)
  [ -n "$strata_dir" ] && strata_library_path="$strata_library_path:$strata_dir"
fi
export LD_LIBRARY_PATH="$strata_library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STRATA_PLUGIN_PATH="$STRATA_BUNDLE/lib/strata/plugins"
export PATH="$STRATA_BUNDLE/bin:$PATH"
strata_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$strata_glibc" ] && [ -n "$STRATA_BUNDLE_NEEDS_GLIBC" ] &&
  [ "$(printf '%s\n%s\n' "$strata_glibc" "$STRATA_BUNDLE_NEEDS_GLIBC" | sort -V | head -1)" != "$STRATA_BUNDLE_NEEDS_GLIBC" ]; then
  echo "env.sh: warning: this glibc is $strata_glibc; the bundle needs $STRATA_BUNDLE_NEEDS_GLIBC" >&2
fi
unset strata_dir strata_library_path strata_glibc
ENV

cat > "$out/run-tests.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the bundle's test programs directly; every argument goes to each of them:
#   bash run-tests.sh --gtest_filter='Cuda*'
# Run from the repository root (or set STRATA_REPO). The tests read fixtures under the source
# directory and plugins under the build directory by the absolute paths they were compiled with;
# where those paths are free here they are made links to the repository and the bundle
# (STRATA_NO_PATH_LINKS=1: leave them).
set -uo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/env.sh"
repo=${STRATA_REPO:-$(git rev-parse --show-toplevel 2>/dev/null || pwd)}
link_if_free() {
  [ -e "$2" ] && return 0
  if mkdir -p "$(dirname "$2")" 2>/dev/null && ln -sfn "$1" "$2" 2>/dev/null; then
    echo "run-tests: linked $2 -> $1"
  else
    echo "run-tests: cannot link $2 -> $1; tests that read it will fail" >&2
  fi
}
if [ "${STRATA_NO_PATH_LINKS:-0}" != 1 ]; then
  [ -n "$STRATA_BUNDLE_SOURCE_DIR" ] && link_if_free "$repo" "$STRATA_BUNDLE_SOURCE_DIR"
  link_if_free "$STRATA_BUNDLE/lib/strata/plugins" "$STRATA_BUNDLE_BUILD_DIR/plugins"
  link_if_free "$STRATA_BUNDLE/tests/fixture_plugins" "$STRATA_BUNDLE_BUILD_DIR/tests/fixture_plugins"
  link_if_free "$STRATA_BUNDLE/tests/probe_fixtures" "$STRATA_BUNDLE_BUILD_DIR/tests/probe_fixtures"
fi
cd "$repo"
# As CTest runs them (tests/CMakeLists.txt).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
status=0
for program in "$STRATA_BUNDLE"/tests/*; do
  [ -f "$program" ] && [ -x "$program" ] || continue
  echo "== $(basename "$program") $*"
  "$program" "$@" || status=1
done
exit $status
RUN
chmod +x "$out/run-tests.sh"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
unpacked=$(du -sb "$out" | cut -f1)
echo "device-bundle: ${#programs[@]} programs and plugins, ${#libraries[@]} libraries: ${!libraries[*]}"
echo "device-bundle: needs glibc >= $glibc, libstdc++ with GLIBCXX_$glibcxx, and CUDA's own libraries"
if [ "$pack" = 1 ]; then
  tar -C "$out" -cf - bin lib tests | xz -T0 -6 > "$out/payload.tar.xz"
  rm -rf "${out:?}"/{bin,lib,tests}
  echo "device-bundle: $out: $(mib "$(du -sb "$out" | cut -f1)") packed ($(mib "$unpacked") unpacked)"
else
  echo "device-bundle: $out: $(mib "$unpacked")"
fi
