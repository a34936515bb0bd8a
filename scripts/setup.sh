#!/usr/bin/env bash
# Installs everything strata needs to build and run, and fetches the default model. Idempotent:
# packages already installed and a model already cached are left alone.
#
#   scripts/setup.sh            install Debian packages and fetch the default model
#   STRATA_CACHE=DIR            where models are cached (default: ${XDG_CACHE_HOME:-~/.cache}/strata)
#
# The CUDA toolkit is expected to be installed already where a GPU build is wanted; without nvcc
# strata builds its CPU backend only.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git python3 python3-pip unzip
  liburing-dev libzstd-dev zstd libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libpcre2-dev
  coinor-libclp-dev libgtest-dev libgmock-dev fio libsentencepiece-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
    SUDO=sudo
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

"$(dirname "$0")/fetch_model.sh"
