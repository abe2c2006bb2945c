# Sourced by tools/up.sh and tools/test.sh: installs the Debian packages whose probe is missing.
#   apt_install "probe:package" …   probe is a command name, or an absolute path to a file
# Packages are installed with --no-install-recommends, so callers name every package they need
# (recommended packages are not pulled in). Set TESSERA_SKIP_INSTALL=1 to skip apt.
apt_install() {
  local missing=() pair probe pkg
  for pair in "$@"; do
    probe=${pair%%:*} pkg=${pair#*:}
    case "$probe" in
      /*) [ -e "$probe" ] || missing+=("$pkg") ;;
      *) command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg") ;;
    esac
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ -n "${TESSERA_SKIP_INSTALL:-}" ]; then
    echo "${0##*/}: missing ${missing[*]} (TESSERA_SKIP_INSTALL is set, not installing)" >&2
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "${0##*/}: missing ${missing[*]}: install them (Debian package names) and run again" >&2
    return 1
  fi
  echo "${0##*/}: installing ${missing[*]} (apt)"
  local sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts these as services on install; Tessera starts its own on free ports.
  local svc
  for svc in redis-server etcd prometheus; do $sudo_cmd service "$svc" stop >/dev/null 2>&1 || true; done
}

# What building the `tessera` binary needs: etcd-client's build script compiles etcd's .proto
# files with protoc, and those import protobuf's well-known types, which Debian ships apart from
# the compiler (only recommended by it).
TESSERA_BUILD_PACKAGES=(
  protoc:protobuf-compiler
  /usr/include/google/protobuf/descriptor.proto:libprotobuf-dev
)
