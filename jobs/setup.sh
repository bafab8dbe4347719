#!/usr/bin/env bash
# jobs/setup.sh -- install what attnsweep needs (Debian 12) and build it into build/.
#
#   jobs/setup.sh            packages for building and running
#   jobs/setup.sh --tests    also the packages the tests use (PyTorch, scipy, xarray, node,
#                            chromium for the report test)
#
# As root it runs apt-get itself; otherwise it prints the exact line to run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
want_tests=0
for a in "$@"; do
  case "$a" in
    --tests) want_tests=1 ;;
    -h|--help) awk 'NR == 1 { next } !/^#/ { exit } !/^# shellcheck/ { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (try --help)" >&2; exit 2 ;;
  esac
done

pkgs=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools zlib1g-dev
      libopenblas-dev libconfig-dev python3-h5py python3-numpy python3-xarray python3-h5netcdf
      python3-netcdf4 python3-matplotlib python3-scipy)
if [ "$want_tests" = 1 ]; then
  pkgs+=(python3-pytest python3-torch nodejs npm clang libclang-rt-14-dev slurm-wlm munge curl iproute2
        chromium)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere than Debian; a working binary is enough.
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=(); for p in "${missing[@]}"; do [ "$p" = nodejs ] || [ "$p" = npm ] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi
if [ "${#missing[@]}" -gt 0 ]; then
  line="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$here/build"
    apt_log=$here/build/setup-apt.log
    echo "setup: installing ${#missing[@]} Debian packages (apt-get output: build/setup-apt.log)..."
    { apt-get update && DEBIAN_FRONTEND=noninteractive $line; } > "$apt_log" 2>&1 ||
      { tail -20 "$apt_log" >&2; echo "setup: apt-get failed (log: build/setup-apt.log; last lines above)" >&2; exit 1; }
    echo "setup: installed ${#missing[@]} Debian packages: ${missing[*]}"
  else
    echo "setup: missing Debian packages. Run as root:" >&2
    echo "  sudo apt-get update && sudo $line" >&2
    exit 1
  fi
fi

mkdir -p "$here/build"
log=$here/build/setup.log
cmake -S "$here" -B "$here/build" -DCMAKE_BUILD_TYPE=Release > "$log" 2>&1 ||
  { cat "$log" >&2; echo "setup: cmake configure failed (log above)" >&2; exit 1; }
cmake --build "$here/build" -j"$(nproc)" >> "$log" 2>&1 ||
  { tail -40 "$log" >&2; echo "setup: build failed (log: build/setup.log)" >&2; exit 1; }
echo "setup: built $here/build/attnsweep"
