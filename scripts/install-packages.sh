# Sourced by the set-up scripts: `install_missing PACKAGE...` installs, with apt, those of the
# Debian packages that are not installed yet (apt-get update only when something is missing).
install_missing() {
  local missing=() package
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
}

# What building the `strata` binary and its plugins needs (scripts/quickstart.sh).
strata_build_packages=(build-essential cmake ninja-build ccache
  libtomlplusplus-dev libspdlog-dev nlohmann-json3-dev
  libboost-dev libboost-filesystem-dev libboost-program-options-dev libopenblas-openmp-dev
  libxxhash-dev)
# What the test command needs on top (scripts/setup.sh): GoogleTest, clang-format for the format
# check, Python with NumPy for the Hugging Face interop tests, abidiff (abigail-tools) for the SDK
# ABI check, and pkg-config.
strata_test_packages=(pkg-config python3 clang-format libgtest-dev python3-numpy abigail-tools)
