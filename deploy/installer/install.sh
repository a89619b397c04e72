#!/bin/sh
# rdmanet installer: runs as the DaemonSet's container on every node.
#
# Copies rdmanet and rdmanet-ipam into the host's CNI bin directory, optionally
# installs a default network config, then stays up and re-checks, so that a
# binary removed or replaced behind our back is put back and an upgrade (a new
# image, hence a new pod) installs its own binaries at start.
#
# Every file is written under a temporary name in its destination directory,
# synced, and then rename(2)d over the old one. rename is atomic within one
# file system, so the kubelet (or Multus) exec'ing the plugin at any instant
# sees the old binary or the new one, never a half-written file; and a binary
# that is executing is unlinked, not overwritten, so there is no ETXTBSY.
#
# Usage: install.sh [--once | --check | --uninstall]
#   (default)    install, then re-check every $RECHECK_SECONDS seconds
#   --once       install and exit (tests, one-shot jobs)
#   --check      exit 0 only if the installed files equal the shipped ones
#                (the DaemonSet's readiness probe)
#   --uninstall  remove what install put there: the default config at once; the
#                binaries, the node name and the etcd client files once the node
#                has no attachment left (exit 3 while it has: the pods' DEL needs
#                the binaries). The state directory is always left alone.
#
# Environment (host paths as seen inside the container):
#   SRC_DIR          where the image keeps the binaries  (/opt/rdmanet/bin)
#   CNI_BIN_DIR      host CNI bin directory               (/host/opt/cni/bin)
#   CNI_CONF_DIR     where a default config goes          (/host/etc/cni/multus/net.d)
#   DEFAULT_CONFIG   a config file to install there; empty = none (default)
#   STATE_DIR        rdmanet's state directory, created 0700 (/host/var/lib/cni/rdmanet)
#   BINARIES         names to install                     (rdmanet rdmanet-ipam)
#   RECHECK_SECONDS  re-check period                      (60)
#   NODE_NAME        this node's name (downward API spec.nodeName); when set,
#                    written to NODE_NAME_FILE for rdmanet-ipam's cluster mode
#   NODE_NAME_FILE   (/host/var/lib/rdmanet/node-name)
#   ETCD_TLS_SRC     the etcd client Secret's mount (/etc/rdmanet/etcd-tls):
#                    its ca.crt, tls.crt and tls.key, when present, are
#                    installed 0600 into ETCD_TLS_DIR (0700) for cluster mode
#   ETCD_TLS_DIR     (/host/etc/rdmanet/etcd)
#   UNINSTALL        "true": the default mode uninstalls instead of installing,
#                    waiting for the node's attachments to be deleted first,
#                    then idles (cluster-wide uninstall: set it on the
#                    DaemonSet, wait for the rollout, then delete it)
set -eu

SRC_DIR=${SRC_DIR:-/opt/rdmanet/bin}
CNI_BIN_DIR=${CNI_BIN_DIR:-/host/opt/cni/bin}
CNI_CONF_DIR=${CNI_CONF_DIR:-/host/etc/cni/multus/net.d}
DEFAULT_CONFIG=${DEFAULT_CONFIG:-}
STATE_DIR=${STATE_DIR:-/host/var/lib/cni/rdmanet}
BINARIES=${BINARIES:-rdmanet rdmanet-ipam}
RECHECK_SECONDS=${RECHECK_SECONDS:-60}
NODE_NAME=${NODE_NAME:-}
NODE_NAME_FILE=${NODE_NAME_FILE:-/host/var/lib/rdmanet/node-name}
ETCD_TLS_SRC=${ETCD_TLS_SRC:-/etc/rdmanet/etcd-tls}
ETCD_TLS_DIR=${ETCD_TLS_DIR:-/host/etc/rdmanet/etcd}
ETCD_TLS_FILES="ca.crt tls.crt tls.key"

log() { echo "rdmanet-install: $*" >&2; }

# atomic_copy SRC DEST MODE: DEST appears with SRC's whole content or not at all.
atomic_copy() {
  src=$1 dest=$2 mode=$3
  # Same directory as DEST: a rename across file systems would be a copy.
  tmp="$(dirname "$dest")/.$(basename "$dest").rdmanet-tmp.$$"
  # A kill between cp and mv leaves only the hidden temporary, never a broken
  # DEST; remove it on every way out.
  trap 'rm -f "$tmp"' EXIT
  cp "$src" "$tmp"
  chmod "$mode" "$tmp"
  # Data on disk before the rename, so a power loss cannot leave DEST empty.
  sync "$tmp" 2>/dev/null || sync
  mv -f "$tmp" "$dest"
  trap - EXIT
}

# Installs FILE into DIR as NAME unless an identical copy is already there.
install_one() {
  src=$1 dest=$2 mode=$3
  [ -f "$src" ] || { log "missing $src in the image"; return 1; }
  if [ -f "$dest" ] && cmp -s "$src" "$dest"; then
    return 0
  fi
  atomic_copy "$src" "$dest" "$mode"
  log "installed $dest"
}

install_all() {
  mkdir -p "$CNI_BIN_DIR"
  # Temporaries of an installer killed with SIGKILL (its trap cannot run).
  rm -f "$CNI_BIN_DIR"/.*.rdmanet-tmp.* "$CNI_CONF_DIR"/.*.rdmanet-tmp.* 2>/dev/null || true
  for b in $BINARIES; do
    install_one "$SRC_DIR/$b" "$CNI_BIN_DIR/$b" 0755
  done
  if [ -n "$DEFAULT_CONFIG" ]; then
    mkdir -p "$CNI_CONF_DIR"
    install_one "$DEFAULT_CONFIG" "$CNI_CONF_DIR/$(basename "$DEFAULT_CONFIG")" 0644
  fi
  # The plugin creates it too; doing it here makes permissions visible early.
  mkdir -p "$STATE_DIR"
  chmod 0700 "$STATE_DIR"
  install_node_files
}

# Cluster-mode IPAM: the node name (never guessed from the hostname) and the
# etcd client certificate, where the CNI binary on the host finds them.
install_node_files() {
  if [ -n "$NODE_NAME" ]; then
    mkdir -p "$(dirname "$NODE_NAME_FILE")"
    printf '%s\n' "$NODE_NAME" > "$NODE_NAME_FILE.src"
    install_one "$NODE_NAME_FILE.src" "$NODE_NAME_FILE" 0644
    rm -f "$NODE_NAME_FILE.src"
  fi
  for f in $ETCD_TLS_FILES; do
    [ -f "$ETCD_TLS_SRC/$f" ] || continue
    mkdir -p "$ETCD_TLS_DIR"
    chmod 0700 "$ETCD_TLS_DIR"
    install_one "$ETCD_TLS_SRC/$f" "$ETCD_TLS_DIR/$f" 0600
  done
}

check_all() {
  for b in $BINARIES; do
    cmp -s "$SRC_DIR/$b" "$CNI_BIN_DIR/$b" || { log "$CNI_BIN_DIR/$b differs from the image"; return 1; }
    [ -x "$CNI_BIN_DIR/$b" ] || { log "$CNI_BIN_DIR/$b is not executable"; return 1; }
  done
  if [ -n "$DEFAULT_CONFIG" ]; then
    cmp -s "$DEFAULT_CONFIG" "$CNI_CONF_DIR/$(basename "$DEFAULT_CONFIG")" || return 1
  fi
  if [ -n "$NODE_NAME" ] && [ "$(cat "$NODE_NAME_FILE" 2>/dev/null)" != "$NODE_NAME" ]; then
    log "$NODE_NAME_FILE does not say $NODE_NAME"
    return 1
  fi
  for f in $ETCD_TLS_FILES; do
    [ ! -f "$ETCD_TLS_SRC/$f" ] || cmp -s "$ETCD_TLS_SRC/$f" "$ETCD_TLS_DIR/$f" || {
      log "$ETCD_TLS_DIR/$f differs from the Secret"
      return 1
    }
  done
  return 0
}

reinstall_if_changed() {
  check_all 2>/dev/null || install_all
}

# The attachment records on this node (<state>/<network>/<id>.json; not the node agent's
# own dot directory): each is a pod whose DEL still needs the binaries.
attachments() {
  find "$STATE_DIR" -mindepth 2 -maxdepth 2 -name '*.json' ! -path "$STATE_DIR/.*" 2>/dev/null | wc -l
}

# Returns 3 (and removes only the default config) while attachments remain.
uninstall_all() {
  if [ -n "$DEFAULT_CONFIG" ]; then
    rm -f "$CNI_CONF_DIR/$(basename "$DEFAULT_CONFIG")"
  fi
  n=$(attachments)
  if [ "$n" -gt 0 ]; then
    log "$n attachment(s) still on this node (records in $STATE_DIR): binaries kept for their DEL"
    return 3
  fi
  for b in $BINARIES; do
    rm -f "$CNI_BIN_DIR/$b"
    log "removed $CNI_BIN_DIR/$b"
  done
  rm -f "$NODE_NAME_FILE"
  for f in $ETCD_TLS_FILES; do
    [ ! -f "$ETCD_TLS_SRC/$f" ] || rm -f "$ETCD_TLS_DIR/$f"
  done
  return 0
}

uninstalled() {
  for b in $BINARIES; do [ ! -e "$CNI_BIN_DIR/$b" ] || return 1; done
}

idle() {
  # Exit promptly on pod deletion (sleep in the background so the trap runs).
  trap 'exit 0' TERM INT
  while :; do
    sleep "$RECHECK_SECONDS" &
    wait $!
    "$@"
  done
}

if [ "${UNINSTALL:-}" = true ]; then
  case "${1:-}" in
    --check) uninstalled; exit $? ;;
    "")
      # Every few seconds until the last attachment's DEL came, then idle.
      trap 'exit 0' TERM INT
      until uninstall_all; do
        sleep 5 &
        wait $!
      done
      idle true
      ;;
  esac
fi

case "${1:-}" in
  --check) check_all ;;
  --once) install_all ;;
  --uninstall) uninstall_all ;;
  "")
    install_all
    # The hashes tell which build a node runs (compare with the image's).
    for b in $BINARIES; do log "$(sha256sum "$CNI_BIN_DIR/$b")"; done
    idle reinstall_if_changed
    ;;
  *) echo "usage: $0 [--once | --check | --uninstall]" >&2; exit 2 ;;
esac
