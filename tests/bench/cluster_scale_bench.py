#!/usr/bin/env python3
"""Cluster-mode IPAM at cluster scale (issue #19 item 4), one run, one machine.

NODES simulated nodes (own node name and data dir each; default 1,000) each start PODS
pods (8) with RAILS rails (8: one network per rail, a /16 each, blocks of BLOCK bits), all
through the real rdmanet-ipam binary with the CNI protocol, against a real 3-member etcd
on 127.0.0.1 (TLS with client certificates; tests/binary/etcd_cluster.py). PARALLEL workers
(default 4) drive different nodes at once, so block claims contend as on a cluster that
starts a job everywhere.

Phase 1: every node's first pod: its first ADD on each rail claims a block.
Phase 2: the other pods: the common path, which should ask etcd nothing.

Printed: wall time and ADD latency per phase (median, p99), the first ADD of each node
(which claims), etcd requests (gRPC calls handled, summed over the members' /metrics)
per ADD in each phase and per claimed block, claim throughput, etcd's database size,
and the invariant (no block with two owners, no address twice, every lease inside its
node's blocks) checked from etcd and every node's store.

Usage: cluster_scale_bench.py [RDMANET_IPAM]   env NODES, PODS, RAILS, BLOCK, PARALLEL
"""

import concurrent.futures
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "binary"))
from etcd_cluster import EtcdCluster, Node, check_invariant  # noqa: E402

NODES = int(os.environ.get("NODES", "1000"))
PODS = int(os.environ.get("PODS", "8"))
RAILS = int(os.environ.get("RAILS", "8"))
BLOCK = int(os.environ.get("BLOCK", "26"))
PARALLEL = int(os.environ.get("PARALLEL", "4"))


def etcd_counters(etcd):
    """(gRPC requests handled, db size in bytes) summed / maxed over the members."""
    handled, size = 0, 0
    for port in etcd.http_ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        for m in re.finditer(r'^grpc_server_handled_total\{[^}]*\} ([0-9.e+]+)$', text, re.M):
            handled += float(m.group(1))
        m = re.search(r'^etcd_mvcc_db_total_size_in_bytes ([0-9.e+]+)$', text, re.M)
        size = max(size, float(m.group(1)) if m else 0)
    return handled, size


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/ipam/rdmanet-ipam")
    etcd = EtcdCluster().start()
    root = tempfile.mkdtemp(prefix="rdmanet-scale-")
    try:
        cluster = {"blockSize": BLOCK, "releaseAfter": 3600,
                   "etcd": {"endpoints": etcd.endpoints, "tls": etcd.tls}}
        nodes = [Node(binary, root, f"node-{i:04d}") for i in range(NODES)]
        confs = {(n.name, r): n.conf(f"rail{r}", cluster,
                                     [[{"subnet": f"10.{100 + r}.0.0/16"}]])
                 for n in nodes for r in range(RAILS)}

        def start_pods(node, pods):
            times = []
            for p in pods:
                for r in range(RAILS):
                    t = time.perf_counter()
                    rc, _, err = node.cni("ADD", f"{node.name}-pod{p}", confs[(node.name, r)],
                                          ifname=f"net{r + 1}")
                    times.append((time.perf_counter() - t) * 1000)
                    if rc != 0:
                        raise SystemExit(f"ADD {node.name} pod {p} rail {r}: {err.strip()[-300:]}")
            return times

        def phase(pods):
            before, _ = etcd_counters(etcd)
            t = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
                per_node = list(pool.map(lambda n: start_pods(n, pods), nodes))
            wall = time.perf_counter() - t
            after, size = etcd_counters(etcd)
            return per_node, wall, after - before, size

        first, wall1, req1, _ = phase([0])
        rest, wall2, req2, size = phase(range(1, PODS))
        adds1 = NODES * RAILS
        adds2 = NODES * RAILS * (PODS - 1)
        blocks = sum(len(etcd.get_prefix(f"/rdmanet/ipam/rail{r}/blocks/")) for r in range(RAILS))
        for r in range(RAILS):
            check_invariant(etcd, nodes, f"rail{r}")
        lat1 = [x for ts in first for x in ts]
        lat2 = [x for ts in rest for x in ts]
        first_add = [ts[0] for ts in first]
        print(f"cluster: {NODES} nodes x {PODS} pods x {RAILS} rails = {NODES * PODS * RAILS} "
              f"ADDs, /{BLOCK} blocks, {PARALLEL} nodes at a time, 3-member etcd on loopback")
        print(f"phase 1 (first pod, claims): {adds1} ADDs in {wall1:.1f} s; ADD median "
              f"{statistics.median(lat1):.2f} ms p99 {pct(lat1, .99):.2f} ms; node's first ADD "
              f"median {statistics.median(first_add):.2f} ms p99 {pct(first_add, .99):.2f} ms")
        print(f"phase 2 (other pods): {adds2} ADDs in {wall2:.1f} s; ADD median "
              f"{statistics.median(lat2):.2f} ms p99 {pct(lat2, .99):.2f} ms")
        print(f"blocks claimed: {blocks} ({blocks / NODES:.1f} per node); claim throughput "
              f"{blocks / wall1:.0f} claims/s over phase 1")
        print(f"etcd requests: phase 1 {req1:.0f} ({req1 / blocks:.2f} per claimed block, "
              f"{req1 / (NODES * 1):.2f} per first pod); phase 2 {req2:.0f} "
              f"({req2 / (NODES * (PODS - 1)):.3f} per pod, {req2 / adds2:.4f} per ADD)")
        print(f"etcd database: {size / 1e6:.1f} MB")
        print(f"invariant: no block with two owners, no address twice, every lease in its "
              f"node's blocks: OK ({NODES * PODS * RAILS} leases on {RAILS} networks)")
    finally:
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
