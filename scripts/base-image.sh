#!/usr/bin/env bash
# Builds the base image that Zaris's Dockerfiles name, debian:bookworm-slim, on this machine from
# Debian's packages, for machines that cannot pull images (no registry): debootstrap
# --variant=minbase, security updates applied, trimmed like Debian's official slim images (no apt
# lists, docs, man pages or translations; dpkg keeps them out of later installs too), then
# `docker import`. Where a registry is reachable, `docker pull debian:bookworm-slim` does the same
# job and the Dockerfiles build unchanged.
#
# Does nothing if the tag already exists (pulled or built before); --force rebuilds it. Building
# needs root (debootstrap and chroot); checking for an existing image does not.
set -euo pipefail

tag=debian:bookworm-slim
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
force=0
invocation="$0 $*"

usage() {
  cat <<EOF
usage: $0 [--force] [--tag NAME] [--mirror URL] [--security-mirror URL]

Builds the Docker image $tag from Debian packages (debootstrap) unless it exists.
  --force                rebuild even if the tag exists
  --tag NAME             image tag to create (default $tag)
  --mirror URL           Debian archive (default \$DEBIAN_MIRROR or http://deb.debian.org/debian)
  --security-mirror URL  security archive (default \$DEBIAN_SECURITY_MIRROR or
                         http://deb.debian.org/debian-security)
Needs root and a running Docker daemon.
EOF
}

log() { printf 'base-image: %s\n' "$*" >&2; }
die() {
  printf 'base-image: error: %s\n' "$*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case $1 in
    --force) force=1 ;;
    --tag) tag=${2:?--tag needs a value}; shift ;;
    --mirror) mirror=${2:?--mirror needs a value}; shift ;;
    --security-mirror) security_mirror=${2:?--security-mirror needs a value}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon (is it running? may this user use it?)"

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  log "$tag exists ($(docker image inspect --format '{{.Id}}, {{.Size}} bytes' "$tag")); nothing to do (--force rebuilds it)"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "building $tag needs root (debootstrap creates a root file system and runs chroot); run: sudo $invocation"

started=$SECONDS

# debootstrap and the archive keyring (debootstrap verifies the Release file against it).
if ! command -v debootstrap >/dev/null || [ ! -e /usr/share/keyrings/debian-archive-keyring.gpg ]; then
  command -v apt-get >/dev/null || die "debootstrap is missing and there is no apt-get to install it"
  log "installing debootstrap and debian-archive-keyring with apt-get"
  apt-get update -qq || log "apt-get update reported errors; trying the install anyway"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    debootstrap debian-archive-keyring >/dev/null
fi

work=$(mktemp -d /var/tmp/zaris-base-image.XXXXXX)
root=$work/rootfs
cleanup() {
  local status=$?
  if [ "$status" != 0 ] && [ -s "$work/debootstrap.log" ]; then
    log "stopped with exit status $status; the last lines of the build log:"
    tail -n 30 "$work/debootstrap.log" >&2 || true
  fi
  # debootstrap mounts /proc and /sys in the new root while it runs; an interrupted run can
  # leave them there. Unmount whatever is still mounted under it, deepest first, before removing.
  awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r mnt; do umount -l "$mnt" || true; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "debootstrap --variant=minbase $suite from $mirror into $root (takes a minute or two)"
if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
  die "debootstrap failed"
fi

in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C \
    DEBIAN_FRONTEND=noninteractive "$@"
}

log "apt sources: $suite, $suite-updates (main) and $suite-security"
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

# Keep documentation, manual pages and translations out of every later install too (as Debian's
# official slim images do), and keep apt's caches out of image layers.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
cat >"$root/etc/apt/apt.conf.d/docker-no-languages" <<'EOF'
Acquire::Languages "none";
EOF

log "applying updates from $suite-updates and $suite-security"
# apt needs name resolution inside the chroot; Docker provides its own resolv.conf at run time.
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root apt-get update -qq >>"$work/debootstrap.log" 2>&1 || die "apt-get update in the new root failed"
upgrades=$(in_root apt-get -s upgrade 2>>"$work/debootstrap.log" | awk '/^Inst / { print $2 }' | xargs)
if [ -n "$upgrades" ]; then
  log "upgrading: $upgrades"
  in_root apt-get upgrade -y -qq >>"$work/debootstrap.log" 2>&1 || die "apt-get upgrade in the new root failed"
else
  log "no updates to apply"
fi
in_root apt-get clean

log "trimming: apt lists and caches, docs (copyright files kept), man pages, translations, logs"
size_before=$(du -sk --one-file-system "$root" | cut -f1)
rm -rf "${root:?}"/var/lib/apt/lists/* "${root:?}"/var/cache/apt/* "${root:?}"/var/cache/debconf/*-old \
  "${root:?}"/var/lib/dpkg/*-old "${root:?}"/tmp/* "${root:?}"/var/tmp/* \
  "${root:?}"/usr/share/man/* "${root:?}"/usr/share/groff/* "${root:?}"/usr/share/info/* \
  "${root:?}"/usr/share/lintian/* "${root:?}"/usr/share/linda/* "${root:?}"/usr/share/locale/*
find "$root/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
find "$root/var/log" -type f -delete
# Host-specific files debootstrap copied or created, and device nodes (Docker provides /dev,
# resolv.conf, hosts and hostname in every container).
rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
rm -rf "${root:?}"/dev/*
: >"$root/etc/machine-id"
size_after=$(du -sk --one-file-system "$root" | cut -f1)
log "root file system: $((size_before / 1024)) MiB before trimming, $((size_after / 1024)) MiB after"

log "docker import as $tag"
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
id=$(tar --numeric-owner -C "$root" -c . |
  docker import \
    --change 'CMD ["bash"]' \
    --change "LABEL com.clustron.zaris.base-image=debootstrap org.opencontainers.image.created=$created" \
    --message "debootstrap --variant=minbase $suite $mirror, updated and trimmed by scripts/base-image.sh" \
    - "$tag")
log "built $tag ($id, $(docker image inspect --format '{{.Size}}' "$tag") bytes) in $((SECONDS - started)) s"
