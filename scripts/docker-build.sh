#!/usr/bin/env bash
# Builds the Zaris container image: the release binary on the host (cargo), a stripped copy in
# target/docker/, the base image if it is missing (scripts/base-image.sh, which needs root to
# build it), then `docker build` of the top-level Dockerfile. Prints the image's size.
#
#   scripts/docker-build.sh                # zaris:dev
#   scripts/docker-build.sh --tag zaris:0.1.0
#   ZARIS_IMAGE=zaris:ci scripts/docker-build.sh --no-cargo
#   scripts/docker-build.sh --binary target/debug/zaris --tag zaris:ci   # what .ci/run tests
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${ZARIS_IMAGE:-zaris:dev}
cargo_build=1
bin=

usage() {
  cat <<EOF
usage: $0 [--tag NAME] [--no-cargo] [--binary PATH]

  --tag NAME      image tag (default \$ZARIS_IMAGE or zaris:dev)
  --no-cargo      use the existing target/release/zaris instead of running cargo build
  --binary PATH   put this zaris binary in the image (implies --no-cargo)
Environment: CARGO_TARGET_DIR is honoured; BASE_IMAGE_ARGS is passed to scripts/base-image.sh.
EOF
}

log() { printf 'docker-build: %s\n' "$*" >&2; }
die() {
  printf 'docker-build: error: %s\n' "$*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case $1 in
    --tag) tag=${2:?--tag needs a value}; shift ;;
    --no-cargo) cargo_build=0 ;;
    --binary) bin=${2:?--binary needs a value}; cargo_build=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

started=$SECONDS
target_dir=${CARGO_TARGET_DIR:-target}
bin=${bin:-$target_dir/release/zaris}
if [ "$cargo_build" = 1 ]; then
  log "cargo build --release -p zaris"
  cargo build --release -p zaris
fi
[ -x "$bin" ] || die "$bin does not exist: run cargo build --release -p zaris (or drop --no-cargo)"

# The build context is this directory and .dockerignore lets only target/docker/zaris (and
# target/release/zaris) through: the binary is staged there whatever CARGO_TARGET_DIR is.
mkdir -p target/docker
staged=target/docker/zaris
cp "$bin" "$staged.tmp"
if command -v strip >/dev/null; then
  strip "$staged.tmp"
else
  log "strip not found (binutils): the image gets the unstripped binary"
fi
mv "$staged.tmp" "$staged"
log "binary: $bin ($(stat -c %s "$bin") bytes), staged as $staged ($(stat -c %s "$staged") bytes)"
version=$("$staged" --version | awk '{ print $2 }')

# shellcheck disable=SC2086 # BASE_IMAGE_ARGS is a list of options.
scripts/base-image.sh ${BASE_IMAGE_ARGS:-}

log "docker build -t $tag (zaris $version)"
docker build --tag "$tag" --build-arg ZARIS_BIN="$staged" --build-arg ZARIS_VERSION="$version" .

size=$(docker image inspect --format '{{.Size}}' "$tag")
base_size=$(docker image inspect --format '{{.Size}}' debian:bookworm-slim)
log "built $tag in $((SECONDS - started)) s: $size bytes ($((size / 1000000)) MB), of which the base image debian:bookworm-slim $base_size bytes ($((base_size / 1000000)) MB)"
