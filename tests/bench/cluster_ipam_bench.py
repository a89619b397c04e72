#!/usr/bin/env python3
"""Cluster-mode IPAM benchmark (issue #8), one run, one machine:

1. ADD latency (median/p99 over ROUNDS calls, interleaved) of rdmanet-ipam in
   cluster mode with a free address in a block the node holds, against node
   mode: the ratio (target <= 1.2).
2. The latency of an ADD that has to claim a new block from etcd (3-member
   cluster on 127.0.0.1, TLS with client certificates).
3. Wall time of 300 concurrent allocations across three simulated nodes, all
   distinct, checked against etcd.

Every call is a fork+exec of the real binary with the CNI protocol, as a
runtime makes it. Usage: cluster_ipam_bench.py [RDMANET_IPAM] (default
build/ipam/rdmanet-ipam). Needs etcd-server, etcd-client, openssl (tests/tools/deps.sh).
"""

import concurrent.futures
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "binary"))
from etcd_cluster import EtcdCluster, Node, check_invariant  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "200"))
CLAIMS = int(os.environ.get("CLAIMS", "50"))


def timed(node, command, cid, conf):
    t = time.perf_counter()
    rc, out, err = node.cni(command, cid, conf)
    ms = (time.perf_counter() - t) * 1000
    if rc != 0:
        raise SystemExit(f"{command} {cid} failed: {err.strip()[-300:]}")
    return ms


def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/ipam/rdmanet-ipam")
    etcd = EtcdCluster().start()
    root = tempfile.mkdtemp(prefix="rdmanet-cbench-")
    try:
        cluster = {"blockSize": 22, "releaseAfter": 3600,
                   "etcd": {"endpoints": etcd.endpoints, "tls": etcd.tls}}
        ranges = [[{"subnet": "10.60.0.0/16", "gateway": "10.60.0.1"}]]
        a = Node(binary, root, "bench-a")
        cluster_conf = a.conf("bench-cluster", cluster, ranges)
        node_conf = a.conf("bench-node", cluster, ranges)
        node_conf = node_conf.replace('"cluster":', '"unused":')  # same config, node mode
        # Warm up both stores; the cluster one claims its first block here.
        timed(a, "ADD", "warm-c", cluster_conf)
        timed(a, "ADD", "warm-n", node_conf)
        t_cluster, t_node = [], []
        for i in range(ROUNDS):  # interleaved, so drift hits both alike
            t_cluster.append(timed(a, "ADD", f"c{i}", cluster_conf))
            t_node.append(timed(a, "ADD", f"n{i}", node_conf))
        assert len(a.blocks("bench-cluster")) == 1, "the loop claimed blocks: make them larger"
        (cm, cp), (nm, np_) = stats(t_cluster), stats(t_node)

        # ADDs that claim a block, in one network (/30 blocks: every 4th ADD
        # claims), and the first ADD of a fresh network (which also records the
        # network's block sizes in etcd), against node mode's first ADD.
        t_claim, t_first, t_first_node = [], [], []
        conf = a.conf("claims", dict(cluster, blockSize=30), ranges)
        timed(a, "ADD", "claims-warm", conf)
        i = 0
        while len(t_claim) < CLAIMS:
            held = len(a.blocks("claims"))
            t = timed(a, "ADD", f"claims{i}", conf)
            i += 1
            if len(a.blocks("claims")) > held:
                t_claim.append(t)
        for i in range(CLAIMS):
            conf = a.conf(f"first{i}", dict(cluster, blockSize=30), ranges)
            t_first.append(timed(a, "ADD", "first", conf))
            conf_n = a.conf(f"firstn{i}", cluster, ranges).replace('"cluster":', '"unused":')
            t_first_node.append(timed(a, "ADD", "first", conf_n))
        (km, kp), (rm, rp), (fm, fp) = stats(t_claim), stats(t_first), stats(t_first_node)

        # 300 concurrent allocations across three nodes (/26 blocks: ~5 claims per node).
        nodes = [Node(binary, root, f"burst-{c}") for c in "abc"]
        bc = dict(cluster, blockSize=26)
        jobs = [(n, f"{n.name}-{i}", n.conf("burst", bc, ranges)) for i in range(100) for n in nodes]
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda j: j[0].cni("ADD", j[1], j[2]), jobs))
        wall = time.perf_counter() - t0
        failed = [r for r in results if r[0] != 0]
        addrs = {r[1]["ips"][0]["address"] for r in results if r[0] == 0}
        owners, leases = check_invariant(etcd, nodes, "burst")

        print(f"rdmanet-ipam cluster mode vs node mode, {ROUNDS} interleaved ADDs each "
              f"(fork+exec included), etcd: 3 members on 127.0.0.1, TLS")
        print(f"{'':36} {'median ms':>10} {'p99 ms':>8}")
        print(f"{'cluster mode, free address in block':36} {cm:10.2f} {cp:8.2f}")
        print(f"{'node mode':36} {nm:10.2f} {np_:8.2f}")
        print(f"ratio cluster/node (median): {cm / nm:.2f}   (target <= 1.2)")
        print(f"{'ADD that claims a new block':36} {km:10.2f} {kp:8.2f}   ({CLAIMS} claims)")
        print(f"{'first ADD of a network, cluster mode':36} {rm:10.2f} {rp:8.2f}   "
              "(claim + recording the block sizes)")
        print(f"{'first ADD of a network, node mode':36} {fm:10.2f} {fp:8.2f}")
        print(f"claim cost (median difference to node mode's first ADD): {km - fm:.2f} ms")
        print(f"300 concurrent ADDs on 3 nodes (16 at a time): {wall:.2f} s, "
              f"{len(failed)} failed, {len(addrs)} distinct addresses, "
              f"{len(owners)} blocks claimed, invariant holds")
    finally:
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
