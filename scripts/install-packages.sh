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
  libxxhash-dev pkg-config libpcre2-dev libsentencepiece-dev libicu-dev liburing-dev
  libopenmpi-dev openmpi-bin)
# What the test command needs on top (scripts/setup.sh): GoogleTest, clang-format for the format
# check, Python with NumPy for the Hugging Face interop tests, abidiff (abigail-tools) for the SDK
# ABI check, and the tokenizer references: SentencePiece's trainer and its Python binding, and
# Node.js with npm for Hugging Face's own tokenizers.js (tests/tokenizers/package-lock.json;
# install_node_unless_present, since a machine may have Node.js from elsewhere, with its own npm).
strata_test_packages=(python3 clang-format libgtest-dev python3-numpy abigail-tools
  sentencepiece python3-sentencepiece)
install_node_unless_present() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && return 0
  install_missing nodejs npm
}
