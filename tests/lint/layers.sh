#!/bin/sh
# The include direction of the layers (README "Layout"): each folder may include
# only itself and the folders listed for it, so no lower layer ever depends on an
# upper one. Prints every include that breaks the rule; non-zero if any does.
#
#   base    nothing of rdmanet's
#   netns   base                      the Linux boundary: namespaces, rtnetlink, sysfs
#   rdma    base netns                the RDMA subsystem: RDMA netlink, GIDs, configfs
#   cni     base                      the CNI protocol
#   plugin  base netns rdma cni       the rdmanet plugin; it knows no IPAM implementation
#   ipam    base cni                  the rdmanet-ipam plugin
#   agent   base netns rdma cni plugin ipam
#                                     the node agent, and the rdmanet binary's main, which
#                                     hands the IPAM it links to the plugin
set -eu
cd "$(dirname "$0")/../.."

allowed() {
  case $1 in
    base) echo "base" ;;
    netns) echo "base netns" ;;
    rdma) echo "base netns rdma" ;;
    cni) echo "base cni" ;;
    plugin) echo "base netns rdma cni plugin" ;;
    ipam) echo "base cni ipam" ;;
    agent) echo "base netns rdma cni plugin ipam agent" ;;
  esac
}

bad=0
checked=0
for layer in base netns rdma cni plugin ipam agent; do
  ok=$(allowed "$layer")
  for file in $(find "$layer" -name '*.h' -o -name '*.cc' | sort); do
    checked=$((checked + 1))
    # Every quoted include names its folder: "netns/link.h".
    for dep in $(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^/"]*\)/.*|\1|p' "$file" | sort -u); do
      case " $ok " in
        *" $dep "*) ;;
        *)
          echo "layers: $file includes $dep/ (a $layer file may include only: $ok)"
          bad=1
          ;;
      esac
    done
    # A quoted include without a folder would dodge the check.
    if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^/"]*"' "$file"; then
      echo "layers: $file has an include without its folder (write \"$layer/...\")"
      bad=1
    fi
  done
done
[ "$checked" -gt 50 ] || { echo "layers: only $checked files found; wrong directory?"; exit 1; }
[ "$bad" -eq 0 ] && echo "layers: $checked files, every include points down"
exit "$bad"
