#!/usr/bin/env bash
# ADD/DEL latency (median, p99) and peak RSS of rdmanet-ipam and of Debian's
# reference host-local at 0, 1,000, 10,000 and 60,000 existing leases in a
# /16, in one run on one machine. Not a test: timing is noisy, read the ratios.
#
#   tests/bench/ipam_bench.sh [path/to/rdmanet-ipam] [path/to/host-local]
#   BENCH_DIR=/var/tmp DISK_LOAD=0 LEVELS=0,1000,10000,60000 (defaults; DISK_LOAD=1: beside a
#   disk writer, disk_load.sh; LEVELS: any of those four)
#
# Then GC at 60,000 leases with all of them valid (GC keeps everything: the cost is
# matching each lease against the valid list, under the store lock), median of 3. With
# GC_BASELINE=path/to/another/rdmanet-ipam that binary's GC is measured too, in the same
# run; GC_ONLY=1 skips the ADD/DEL part. (Debian's host-local predates GC.)
#
# Every call is a fork+exec of the binary with the CNI environment and the
# config on stdin, as a runtime does. Peak RSS comes from GNU time (%M) on
# extra ADD/DEL calls at each level: posix_spawn's vfork would make wait4's
# ru_maxrss report the (larger) Python parent instead. Existing leases are written directly in each
# plugin's own on-disk format (host-local: <dataDir>/<net>/<ip> holding
# "<cid>\r\n<ifname>"; rdmanet-ipam: leases/ and attachments/ as store.h
# describes, the index left to be rebuilt by a warm-up call), because creating
# 60,000 leases through host-local itself would take hours.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ours="${1:-$here/../../build/ipam/rdmanet-ipam}"
theirs="${2:-/usr/lib/cni/host-local}"
# shellcheck source=disk_load.sh
. "$here/disk_load.sh"
trap stop_disk_load EXIT
start_disk_load "${BENCH_DIR:-/var/tmp}"
echo "ipam_bench: $(disk_load_label)" >&2
python3 - "$ours" "$theirs" <<'PY'
import ipaddress, json, os, shutil, statistics, subprocess, sys, tempfile, time

OURS, THEIRS = sys.argv[1], sys.argv[2]
LEVELS = [int(n) for n in os.environ.get("LEVELS", "0,1000,10000,60000").split(",")]
SUBNET = ipaddress.ip_network("10.1.0.0/16")
NETNS = "/proc/1/ns/net"  # exists: populated leases are live, never reclaimed


def samples(binary, level):
    if binary == OURS:
        return 200
    return {0: 100, 1000: 60, 10000: 25, 60000: 12}[level]


def fnv1a64(data: bytes) -> int:
    h = 14695981039346656037
    for b in data:
        h ^= b
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def populate_ours(netdir, n):
    os.makedirs(netdir + "/leases", mode=0o700)
    os.makedirs(netdir + "/attachments", mode=0o700)
    os.makedirs(netdir + "/index", mode=0o700)
    hosts = SUBNET.hosts()
    next(hosts)  # gateway
    for i in range(n):
        ip = str(next(hosts))
        cid, ifname = "pre%06d" % i, "eth0"
        owner = {"containerID": cid, "ifname": ifname, "ifnameHex": ifname.encode().hex()}
        with open(f"{netdir}/leases/{ip}", "w") as f:
            json.dump(dict(owner, ip=ip, netns=NETNS), f)
        name = "%016x-%s-%s" % (fnv1a64(cid.encode() + b"\0" + ifname.encode()), cid[:64],
                                ifname.encode().hex())
        with open(f"{netdir}/attachments/{name}", "w") as f:
            json.dump(dict(owner, netns=NETNS, ips=[ip]), f)


def populate_theirs(netdir, n):
    os.makedirs(netdir)
    hosts = SUBNET.hosts()
    next(hosts)
    last = None
    for i in range(n):
        last = str(next(hosts))
        with open(f"{netdir}/{last}", "w") as f:
            f.write("pre%06d\r\neth0" % i)
    if last:
        with open(f"{netdir}/last_reserved_ip.0", "w") as f:
            f.write(last)


def peak_rss(binary, command, cid, conf):
    """Runs one call under GNU time; returns its peak RSS in KB."""
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": cid, "CNI_NETNS": NETNS,
           "CNI_IFNAME": "eth0", "CNI_PATH": "/usr/lib/cni", "PATH": "/usr/bin:/bin"}
    with tempfile.NamedTemporaryFile("r") as out:
        r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name, binary], input=conf,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            sys.exit(f"{binary} {command} {cid} under /usr/bin/time failed")
        return int(out.read().split()[-1])


def call(binary, command, cid, conf):
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": cid, "CNI_NETNS": NETNS,
           "CNI_IFNAME": "eth0", "CNI_PATH": "/usr/lib/cni", "PATH": "/usr/bin:/bin"}
    rfd, wfd = os.pipe()
    ofd = os.open(os.devnull, os.O_WRONLY)
    os.write(wfd, conf)  # small: fits the pipe buffer
    os.close(wfd)
    out_r, out_w = os.pipe()
    t0 = time.perf_counter()
    pid = os.posix_spawn(binary, [binary], env,
                         file_actions=[(os.POSIX_SPAWN_DUP2, rfd, 0),
                                       (os.POSIX_SPAWN_DUP2, out_w, 1),
                                       (os.POSIX_SPAWN_DUP2, ofd, 2)])
    os.close(out_w)
    out = b""
    while chunk := os.read(out_r, 65536):
        out += chunk
    _, status, rusage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - t0
    for fd in (rfd, ofd, out_r):
        os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{binary} {command} {cid} failed: {out.decode(errors='replace')}")
    return elapsed * 1000.0, rusage.ru_maxrss


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def measure(binary, ipam_type, level, root):
    name = "bench"
    data = os.path.join(root, ipam_type)
    netdir = os.path.join(data, name)
    (populate_ours if binary == OURS else populate_theirs)(netdir, level)
    conf = json.dumps({"cniVersion": "1.0.0", "name": name, "type": "bench",
                       "ipam": {"type": ipam_type, "dataDir": data,
                                "ranges": [[{"subnet": str(SUBNET)}]]}}).encode()
    # Warm-up (page cache; rdmanet-ipam builds its index here), not measured.
    call(binary, "ADD", "warmup", conf)
    call(binary, "DEL", "warmup", conf)
    if binary == OURS and level:
        call(binary, "CHECK", "pre000000", conf)  # the populated store reads back
    n = samples(binary, level)
    add, dele = [], []
    for i in range(n):
        add.append(call(binary, "ADD", "bench%05d" % i, conf)[0])
    for i in range(n):
        dele.append(call(binary, "DEL", "bench%05d" % i, conf)[0])
    rss = 0
    for i in range(3):
        rss = max(rss, peak_rss(binary, "ADD", "rss%d" % i, conf))
        rss = max(rss, peak_rss(binary, "DEL", "rss%d" % i, conf))
    shutil.rmtree(data)
    return {"n": n, "add": add, "del": dele, "rss": rss}


def gc_seconds(binary, root, level=60000, runs=3):
    """Median wall time of a GC with every populated lease valid; checks none was lost."""
    name = "gcbench"
    data = os.path.join(root, "gc")
    netdir = os.path.join(data, name)
    populate_ours(netdir, level)
    valid = [{"containerID": "pre%06d" % i, "ifname": "eth0"} for i in range(level)]
    conf = json.dumps({"cniVersion": "1.1.0", "name": name, "type": "bench",
                       "cni.dev/valid-attachments": valid,
                       "ipam": {"type": "rdmanet-ipam", "dataDir": data,
                                "ranges": [[{"subnet": str(SUBNET)}]]}}).encode()
    env = {"CNI_COMMAND": "GC", "CNI_PATH": "/usr/lib/cni", "PATH": "/usr/bin:/bin"}
    times = []
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            r = subprocess.run([binary], input=conf, env=env, capture_output=True)
            times.append(time.perf_counter() - t0)
            if r.returncode != 0:
                sys.exit(f"{binary} GC failed: {r.stdout.decode(errors='replace')}")
        left = len(os.listdir(netdir + "/leases"))
        if left != level:
            sys.exit(f"{binary} GC released {level - left} valid leases")
    finally:
        shutil.rmtree(data)
    return statistics.median(times)


def gc_main(root):
    baseline = os.environ.get("GC_BASELINE")
    ours = gc_seconds(OURS, root)
    print(f"rdmanet-ipam GC, 60,000 leases all valid, median of 3: {ours:.3f} s")
    if baseline:
        theirs = gc_seconds(baseline, root)
        print(f"baseline {baseline} GC, same: {theirs:.3f} s ({theirs / ours:.1f}x ours)")


def main():
    for b in (OURS, THEIRS):
        if not os.access(b, os.X_OK):
            sys.exit(f"not executable: {b}")
    root = tempfile.mkdtemp(prefix="ipam_bench.", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    if os.environ.get("GC_ONLY"):
        try:
            gc_main(root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    try:
        rows = []
        for level in LEVELS:
            ours = measure(OURS, "rdmanet-ipam", level, root)
            theirs = measure(THEIRS, "host-local", level, root)
            rows.append((level, ours, theirs))
            print(f"  measured {level} leases", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    fs = os.popen(f"df -T {os.environ.get('BENCH_DIR', '/var/tmp')} | tail -1").read().split()
    print(f"rdmanet-ipam vs host-local, {SUBNET}, fork+exec per call, "
          f"{os.cpu_count()} CPUs, store on {fs[1] if len(fs) > 1 else '?'}, "
          f"{'with a disk writer' if os.environ.get('DISK_LOAD') == '1' else 'quiet disk'}")
    print("| leases | op  | rdmanet-ipam median / p99 (ms) | host-local median / p99 (ms) "
          "| host-local / rdmanet (median) | samples (ours/theirs) |")
    print("|---:|---|---:|---:|---:|---:|")
    for level, o, t in rows:
        for op in ("add", "del"):
            om, tm = statistics.median(o[op]), statistics.median(t[op])
            print(f"| {level:,} | {op.upper()} | {om:.2f} / {pct(o[op], 99):.2f} "
                  f"| {tm:.2f} / {pct(t[op], 99):.2f} | {tm / om:.1f}x | {o['n']}/{t['n']} |")
    print()
    print("| leases | rdmanet-ipam peak RSS (KB, GNU time) | host-local peak RSS (KB, GNU time) |")
    print("|---:|---:|---:|")
    for level, o, t in rows:
        print(f"| {level:,} | {o['rss']:,} | {t['rss']:,} |")
    base = statistics.median(rows[0][1]["add"])
    top = statistics.median(rows[-1][1]["add"])
    at10k = next(r for r in rows if r[0] == 10000)
    print()
    print(f"rdmanet-ipam ADD median at {LEVELS[-1]:,} / at 0: {top / base:.2f} (target <= 2)")
    print(f"host-local / rdmanet-ipam ADD median at 10,000: "
          f"{statistics.median(at10k[2]['add']) / statistics.median(at10k[1]['add']):.1f}x "
          f"(target >= 20)")
    print()
    if 60000 not in LEVELS:
        return  # the GC part runs at 60,000 leases
    root = tempfile.mkdtemp(prefix="ipam_bench.", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    try:
        gc_main(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


main()
PY
