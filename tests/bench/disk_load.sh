# Sourced by the benchmarks: DISK_LOAD=1 starts a writer standing in for what a busy node
# does to its disk at pod start (image pulls, checkpoints): a loop of 256 MiB writes, each
# ended by fdatasync, to a file beside the benchmark's state and IPAM directories (same
# file system), until the benchmark ends. Every fsync a plugin makes then waits behind it.
#
#   start_disk_load DIR   (no-op unless DISK_LOAD=1; sets disk_load_pid)
#   stop_disk_load
disk_load_pid=""
disk_load_file=""
start_disk_load() {
  [[ "${DISK_LOAD:-0}" == 1 ]] || return 0
  disk_load_file="$1/disk-load.$$"
  (
    trap 'exit 0' TERM
    while :; do
      dd if=/dev/zero of="$disk_load_file" bs=1M count=256 conv=fdatasync status=none
    done
  ) 2>/dev/null &
  disk_load_pid=$!
  sleep 1 # let the first write get going
}
stop_disk_load() {
  [[ -n "$disk_load_pid" ]] || return 0
  kill "$disk_load_pid" 2>/dev/null || true
  pkill -P "$disk_load_pid" dd 2>/dev/null || true
  wait "$disk_load_pid" 2>/dev/null || true
  rm -f "$disk_load_file"
  disk_load_pid=""
}
disk_load_label() { [[ "${DISK_LOAD:-0}" == 1 ]] && echo "with a disk writer (DISK_LOAD=1)" || echo "quiet disk"; }
