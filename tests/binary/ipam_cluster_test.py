#!/usr/bin/env python3
"""rdmanet-ipam in cluster mode against a real 3-member etcd cluster (TLS with
client certificates) on 127.0.0.1, with three simulated nodes (own node name
and store each) driving the real binary through the CNI protocol.

Usage: ipam_cluster_test.py RDMANET_IPAM_BINARY
Fails (never skips) when etcd or openssl is missing.
"""

import concurrent.futures
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_cluster import EtcdCluster, LossyProxy, Node, check_invariant  # noqa: E402

BINARY = None
PREFIX = "/rdmanet/ipam"


class ClusterIpam(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("etcd", "etcdctl", "openssl", "strace"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is not installed (tests/tools/deps.sh installs it)")
        cls.etcd = EtcdCluster().start()

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="rdmanet-cluster-")
        self.nodes = [Node(BINARY, self.root, f"node-{c}") for c in "abc"]
        # A member killed by the previous test comes back.
        for i, p in self.etcd.procs.items():
            if p is None:
                self.etcd.start_member(i)
        self.etcd.wait_healthy()

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def cluster(self, **extra):
        c = {"blockSize": 29, "releaseAfter": 3600,
             "etcd": {"endpoints": self.etcd.endpoints, "prefix": PREFIX, "tls": self.etcd.tls,
                      "timeout": 8}}
        c.update(extra)
        return c

    def add_many(self, jobs, workers=6):
        """jobs: [(node, cid, conf)] -> [(node, cid, rc, out, err)], run concurrently."""
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(n.cni, "ADD", cid, conf) for n, cid, conf in jobs]
            return [(n, cid, *f.result()) for (n, cid, _), f in zip(jobs, futures)]

    def assert_all_added(self, results):
        failed = [(n.name, cid, rc, err.strip()[-300:]) for n, cid, rc, _, err in results if rc != 0]
        self.assertEqual(failed, [])
        addrs = [out["ips"][0]["address"] for *_, out, _ in results]
        self.assertEqual(len(addrs), len(set(addrs)), "an address was handed out twice")
        return addrs

    def test_three_nodes_allocate_concurrently_without_duplicates(self):
        net = "rail-concurrent"
        ranges = [[{"subnet": "10.40.0.0/25", "gateway": "10.40.0.1"}]]
        jobs = [(n, f"{n.name}-pod{i}", n.conf(net, self.cluster(), ranges))
                for i in range(30) for n in self.nodes]
        results = self.add_many(jobs)
        addrs = self.assert_all_added(results)
        self.assertTrue(all(a.endswith("/25") for a in addrs))
        owners, leases = check_invariant(self.etcd, self.nodes, net)
        self.assertEqual(len(leases), 90)
        # Checked from both sides: every lease lies in a block etcd gives its node.
        for n in self.nodes:
            self.assertGreaterEqual(len(n.blocks(net)), 4)  # 30 addresses need >= 4 /29 blocks
        self.assertEqual(sorted(owners), sorted(b for n in self.nodes for b in n.blocks(net)))
        # Repeated ADD: the same address, no new block.
        n = self.nodes[0]
        rc, out, _ = n.cni("ADD", "node-a-pod0", n.conf(net, self.cluster(), ranges))
        self.assertEqual(rc, 0)
        self.assertIn(out["ips"][0]["address"], addrs)

    def test_leader_killed_during_the_run_loses_nothing(self):
        net = "rail-leader"
        # /30 blocks: at most four addresses each, so claims happen all run long.
        ranges = [[{"subnet": "10.41.0.0/24", "gateway": "10.41.0.1"}]]
        cluster = self.cluster(blockSize=30)
        jobs = [(n, f"{n.name}-pod{i}", n.conf(net, cluster, ranges))
                for i in range(60) for n in self.nodes]
        blocks = f"{PREFIX}/{net}/blocks/"
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(n.cni, "ADD", cid, conf) for n, cid, conf in jobs]
            while sum(f.done() for f in futures) < 15:
                time.sleep(0.01)
            leader = self.etcd.leader()
            claimed_before_kill = len(self.etcd.get_prefix(blocks))
            self.etcd.kill(leader)
            done_at_kill = sum(f.done() for f in futures)
            results = [(n, cid, *f.result()) for (n, cid, _), f in zip(jobs, futures)]
        self.assertLess(done_at_kill, len(jobs) - 30, "the run ended before the leader was killed")
        self.assert_all_added(results)
        owners, leases = check_invariant(self.etcd, self.nodes, net)
        self.assertEqual(len(leases), 180)
        # Claims resumed after the election: most blocks were claimed after the kill.
        self.assertGreater(len(owners), claimed_before_kill + 10)

    def test_unreachable_etcd_serves_inside_blocks_then_fails_with_11(self):
        net = "rail-partition"
        ranges = [[{"subnet": "10.42.0.0/26", "gateway": "10.42.0.1"}]]
        n = self.nodes[0]
        rc, out, err = n.cni("ADD", "p0", n.conf(net, self.cluster(), ranges))
        self.assertEqual(rc, 0, err)
        [block] = n.blocks(net)
        # Partitioned: the endpoints now point at ports nobody listens on.
        dead = self.cluster()
        dead["etcd"] = dict(dead["etcd"], endpoints=["https://127.0.0.1:9", "https://127.0.0.1:11"],
                            timeout=1)
        conf = n.conf(net, dead, ranges)
        usable = [a for a in ipaddress.ip_network(block) if str(a) not in ("10.42.0.0", "10.42.0.1")]
        got = [out["ips"][0]["address"].split("/")[0]]
        trace = os.path.join(self.root, "connect.trace")
        for i in range(1, len(usable)):
            rc, out, err = n.cni("ADD", f"p{i}", conf, trace=trace)
            self.assertEqual(rc, 0, err)
            got.append(out["ips"][0]["address"].split("/")[0])
            with open(trace) as f:
                self.assertNotIn("connect(", f.read(), "an ADD with a free address made a network call")
        self.assertEqual(sorted(got), sorted(str(a) for a in usable))
        rc, out, err = n.cni("ADD", "one-too-many", conf)
        self.assertNotEqual(rc, 0)
        self.assertEqual(out["code"], 11, err)
        self.assertIn("https://127.0.0.1:9", out["msg"])
        self.assertEqual(n.blocks(net), [block])  # nothing outside its block
        self.assertNotIn("one-too-many", json.dumps(n.leases(net)))
        check_invariant(self.etcd, self.nodes, net)
        # Reachable again: the next ADD claims a new block.
        rc, _, err = n.cni("ADD", "one-too-many", n.conf(net, self.cluster(), ranges))
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(n.blocks(net)), 2)
        check_invariant(self.etcd, self.nodes, net)

    def test_empty_block_released_after_release_after(self):
        net = "rail-release"
        ranges = [[{"subnet": "10.43.0.0/26", "gateway": "10.43.0.1"}]]
        n = self.nodes[1]
        for release_after, expect_released in ((3600, False), (0, True)):
            conf = n.conf(net, self.cluster(releaseAfter=release_after), ranges)
            for i in range(3):
                self.assertEqual(n.cni("ADD", f"r{i}", conf)[0], 0)
            [block] = n.blocks(net)
            for i in range(3):
                self.assertEqual(n.cni("DEL", f"r{i}", conf)[0], 0)
            key = f"{PREFIX}/{net}/blocks/{block.replace('/', '_')}"
            in_etcd = key in self.etcd.get_prefix(f"{PREFIX}/{net}/")
            self.assertEqual(in_etcd, not expect_released, f"releaseAfter {release_after}")
            self.assertEqual(n.blocks(net), [] if expect_released else [block])
            check_invariant(self.etcd, self.nodes, net)
        # A DEL that empties nothing releases nothing; the DEL is idempotent.
        self.assertEqual(n.cni("DEL", "r0", conf)[0], 0)

    def test_operator_reclaims_the_blocks_of_a_node_that_is_gone(self):
        net = "rail-reclaim"
        ranges = [[{"subnet": "10.44.0.0/27", "gateway": "10.44.0.1"}]]  # 4 blocks of /29
        a, b, c = self.nodes
        for i in range(12):  # c takes 2 blocks
            self.assertEqual(c.cni("ADD", f"c{i}", c.conf(net, self.cluster(), ranges))[0], 0)
        for i in range(12):  # a takes the other 2
            self.assertEqual(a.cni("ADD", f"a{i}", a.conf(net, self.cluster(), ranges))[0], 0)
        rc, out, _ = b.cni("ADD", "b0", b.conf(net, self.cluster(), ranges))
        self.assertNotEqual(rc, 0)
        self.assertEqual(out["code"], 104)
        self.assertIn("all 4 of its blocks are claimed", out["msg"])
        check_invariant(self.etcd, self.nodes, net)
        # Node c is gone (drained, deleted, its disk wiped): the operator reclaims.
        conf_file = os.path.join(self.root, "net.json")
        with open(conf_file, "w") as f:
            f.write(b.conf(net, self.cluster(), ranges))
        listing = subprocess.run([BINARY, "cluster", "blocks", conf_file], capture_output=True, text=True)
        self.assertEqual(listing.returncode, 0, listing.stderr)
        self.assertEqual(listing.stdout.count(" node-c "), 2)
        r = subprocess.run([BINARY, "cluster", "reclaim-node", conf_file, "node-c"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 blocks of node-c reclaimed", r.stdout)
        shutil.rmtree(c.data)
        rc, out, err = b.cni("ADD", "b0", b.conf(net, self.cluster(), ranges))
        self.assertEqual(rc, 0, err)
        check_invariant(self.etcd, self.nodes, net)
        # Reclaiming a node that holds nothing changes nothing.
        r = subprocess.run([BINARY, "cluster", "reclaim-node", conf_file, "node-x"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("0 blocks of node-x reclaimed", r.stdout)

    def reconcile(self, node, conf, ttl=2):
        r = subprocess.run([BINARY, "reconcile", "--heartbeat-ttl", str(ttl), "--list-silent", "-"],
                           input=conf, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_agents_heartbeat_and_the_blocks_of_a_silent_node_are_reported_not_taken(self):
        net = "rail-heartbeat"
        ranges = [[{"subnet": "10.47.0.0/27"}]]
        a, b, _ = self.nodes
        for n in (a, b):
            self.assertEqual(n.cni("ADD", n.name + "-0", n.conf(net, self.cluster(), ranges))[0], 0)
        # a's agent beats first: b has a block and no heartbeat yet.
        out_a = self.reconcile(a, a.conf(net, self.cluster(), ranges))
        self.assertEqual(out_a["silentNodes"], {"node-b": 1})
        self.assertTrue(out_a["cluster"])
        self.assertEqual((out_a["pools"][0]["blocks"], out_a["pools"][0]["used"]), (1, 1))
        out_b = self.reconcile(b, b.conf(net, self.cluster(), ranges))
        self.assertEqual(out_b["silentNodes"], {})  # both beat now
        beats = self.etcd.get_prefix(PREFIX + "/.agents/")
        self.assertEqual(sorted(beats), [PREFIX + "/.agents/node-a", PREFIX + "/.agents/node-b"])
        # b's agent stops: its heartbeat's lease runs out; a's reports b's block, and it
        # stays b's (only reclaim-node takes it back).
        deadline = time.time() + 10
        while time.time() < deadline:
            out_a = self.reconcile(a, a.conf(net, self.cluster(), ranges))
            if out_a["silentNodes"]:
                break
            time.sleep(0.5)
        self.assertEqual(out_a["silentNodes"], {"node-b": 1})
        owners, _ = check_invariant(self.etcd, self.nodes, net)
        self.assertEqual(b.blocks(net), [blk for blk, n in owners.items() if n == "node-b"])
        # b's agent is back: nothing silent.
        self.reconcile(b, b.conf(net, self.cluster(), ranges))
        self.assertEqual(self.reconcile(a, a.conf(net, self.cluster(), ranges))["silentNodes"], {})
        # etcd unreachable: the local part is done and the error reported.
        conf = a.conf(net, self.cluster(etcd={"endpoints": ["https://127.0.0.1:1"],
                                              "tls": self.etcd.tls, "timeout": 1}), ranges)
        out = self.reconcile(a, conf)
        self.assertIn("etcdError", out)
        self.assertEqual(out["pools"][0]["used"], 1)

    def test_claim_recorded_in_etcd_but_not_locally_is_adopted(self):
        # A kill between the etcd transaction and writing blocks.json.
        net = "rail-adopt"
        ranges = [[{"subnet": "10.45.0.0/26", "gateway": "10.45.0.1"}]]
        n = self.nodes[2]
        conf = n.conf(net, self.cluster(), ranges)
        self.assertEqual(n.cni("ADD", "x0", conf)[0], 0)
        [block] = n.blocks(net)
        os.remove(os.path.join(n.data, net, "blocks.json"))
        before = self.etcd.get_prefix(f"{PREFIX}/{net}/blocks/", "mod_revision")
        rc, out, err = n.cni("ADD", "x1", conf)
        self.assertEqual(rc, 0, err)
        self.assertEqual(n.blocks(net), [block])  # adopted
        after = self.etcd.get_prefix(f"{PREFIX}/{net}/blocks/", "mod_revision")
        self.assertEqual(list(after), list(before))  # no second claim
        # Rewritten, so that a delete or reclaim comparing the old revision cannot land.
        [key] = after
        self.assertGreater(int(after[key]), int(before[key]))
        check_invariant(self.etcd, self.nodes, net)

    def test_claim_whose_answer_was_lost_is_still_the_nodes(self):
        # The claim commits, the answer is lost, the client retries on the next
        # member and finds the key taken: by this very claim.
        net = "rail-lost-answer"
        ranges = [[{"subnet": "10.49.0.0/26", "gateway": "10.49.0.1"}]]
        n = self.nodes[0]
        # Connection 1 reads the blocks, connection 2 is the claim.
        with LossyProxy(self.etcd.http_ports, drop={2}) as proxy:
            cluster = {"blockSize": 29, "releaseAfter": 3600,
                       "etcd": {"endpoints": proxy.urls,
                                "prefix": PREFIX, "timeout": 8}}
            rc, out, err = n.cni("ADD", "l0", n.conf(net, cluster, ranges))
            self.assertEqual(rc, 0, err)
            self.assertEqual(proxy.dropped, 1)
        keys = self.etcd.get_prefix(f"{PREFIX}/{net}/blocks/")
        self.assertEqual(len(keys), 1, f"a second block was claimed: {sorted(keys)}")
        self.assertEqual(n.blocks(net), [k.rsplit("/", 1)[1].replace("_", "/") for k in keys])
        check_invariant(self.etcd, self.nodes, net)

    def test_adoption_whose_answer_was_lost_is_still_the_nodes(self):
        net = "rail-lost-adopt"
        ranges = [[{"subnet": "10.54.0.0/26", "gateway": "10.54.0.1"}]]
        n = self.nodes[1]
        self.assertEqual(n.cni("ADD", "m0", n.conf(net, self.cluster(), ranges))[0], 0)
        [block] = n.blocks(net)
        os.remove(os.path.join(n.data, net, "blocks.json"))
        # Connection 1 reads the blocks, connection 2 is the adoption (the rewrite).
        with LossyProxy(self.etcd.http_ports, drop={2}) as proxy:
            cluster = {"blockSize": 29, "releaseAfter": 3600,
                       "etcd": {"endpoints": proxy.urls, "prefix": PREFIX, "timeout": 8}}
            rc, out, err = n.cni("ADD", "m1", n.conf(net, cluster, ranges))
            self.assertEqual(rc, 0, err)
            self.assertEqual(proxy.dropped, 1)
        self.assertEqual(n.blocks(net), [block])
        self.assertEqual(len(self.etcd.get_prefix(f"{PREFIX}/{net}/blocks/")), 1,
                         "a second block was claimed")
        check_invariant(self.etcd, self.nodes, net)

    def test_a_second_block_size_is_refused(self):
        net = "rail-resize"
        ranges = [[{"subnet": "10.47.0.0/27", "gateway": "10.47.0.1"}]]  # 4 /29s or 2 /28s
        a, b, _ = self.nodes
        self.assertEqual(a.cni("ADD", "a0", a.conf(net, self.cluster(), ranges))[0], 0)
        # b reads a newer NAD with /28 blocks: one of the two would cover a's /29.
        rc, out, _ = b.cni("ADD", "b0", b.conf(net, self.cluster(blockSize=28), ranges))
        self.assertEqual((rc, out.get("code")), (1, 7), out)
        self.assertIn("blockSize", out["msg"])
        self.assertEqual(b.blocks(net), [])
        check_invariant(self.etcd, self.nodes, net)

    def test_two_block_sizes_claiming_at_once_never_overlap(self):
        # The first claims of a network race with different sizes: one size wins.
        net = "rail-race"
        ranges = [[{"subnet": "10.48.0.0/26", "gateway": "10.48.0.1"}]]
        a, b, _ = self.nodes
        jobs = [(n, f"{n.name}-{i}", n.conf(net, self.cluster(blockSize=size), ranges))
                for i in range(8) for n, size in ((a, 29), (b, 28))]
        results = self.add_many(jobs, workers=8)
        won = {n.name for n, _, rc, _, _ in results if rc == 0}
        self.assertEqual(len(won), 1, "both block sizes got addresses")
        for n, cid, rc, out, err in results:
            self.assertIn(out.get("code") if rc else 0, (0, 7), err[-300:])
        check_invariant(self.etcd, self.nodes, net)

    def test_blocks_with_nothing_to_hand_out_are_not_claimed(self):
        net = "rail-excluded"
        ranges = [[{"subnet": "10.53.0.0/26", "gateway": "10.53.0.1"}]]
        n = self.nodes[0]
        # 7 of the 8 /29 blocks are excluded whole.
        conf = n.conf(net, self.cluster(), ranges,
                      exclude=["10.53.0.0/27", "10.53.0.32/28", "10.53.0.48/29"])
        rc, out, err = n.cni("ADD", "e0", conf)
        self.assertEqual(rc, 0, err)
        self.assertEqual(n.blocks(net), ["10.53.0.56/29"])
        self.assertEqual(len(self.etcd.get_prefix(f"{PREFIX}/{net}/blocks/")), 1)
        check_invariant(self.etcd, self.nodes, net)

    def test_damaged_block_list_fails_add_but_never_del(self):
        net = "rail-damaged"
        ranges = [[{"subnet": "10.50.0.0/26", "gateway": "10.50.0.1"}]]
        n = self.nodes[1]
        conf = n.conf(net, self.cluster(), ranges)
        self.assertEqual(n.cni("ADD", "d0", conf)[0], 0)
        with open(os.path.join(n.data, net, "blocks.json"), "w") as f:
            f.write("{not json")
        rc, out, _ = n.cni("ADD", "d1", conf)
        self.assertEqual((rc, out.get("code")), (1, 107), out)
        self.assertIn("blocks.json", out["msg"])
        rc, _, err = n.cni("DEL", "d0", conf)
        self.assertEqual(rc, 0, err)
        self.assertEqual(n.leases(net), [])

    def test_release_etcd_did_not_answer_is_finished_later(self):
        net = "rail-pending"
        ranges = [[{"subnet": "10.51.0.0/26", "gateway": "10.51.0.1"}]]
        n = self.nodes[2]
        live = self.cluster(releaseAfter=0)
        dead = dict(live, etcd=dict(live["etcd"], endpoints=["https://127.0.0.1:9"], timeout=1))
        blocks_key = f"{PREFIX}/{net}/blocks/"

        def pending():
            with open(os.path.join(n.data, net, "blocks.json")) as f:
                return [b["block"] for b in json.load(f).get("releasing", [])]

        self.assertEqual(n.cni("ADD", "q0", n.conf(net, live, ranges))[0], 0)
        [block] = n.blocks(net)
        # The DEL empties the block; etcd does not answer the release.
        rc, _, err = n.cni("DEL", "q0", n.conf(net, dead, ranges))
        self.assertEqual(rc, 0, err)
        self.assertEqual((n.blocks(net), pending()), ([], [block]))
        self.assertEqual(len(self.etcd.get_prefix(blocks_key)), 1)
        # The next claim takes it back (rewritten), rather than claiming another.
        self.assertEqual(n.cni("ADD", "q1", n.conf(net, live, ranges))[0], 0)
        self.assertEqual((n.blocks(net), pending()), ([block], []))
        self.assertEqual(len(self.etcd.get_prefix(blocks_key)), 1)
        # Again, and this time GC finishes the release.
        self.assertEqual(n.cni("DEL", "q1", n.conf(net, dead, ranges))[0], 0)
        self.assertEqual(pending(), [block])
        gc = json.loads(n.conf(net, live, ranges))
        gc["cni.dev/valid-attachments"] = []
        rc, _, err = n.cni("GC", "", json.dumps(gc))
        self.assertEqual(rc, 0, err)
        self.assertEqual((n.blocks(net), pending()), ([], []))
        self.assertEqual(self.etcd.get_prefix(blocks_key), {})
        check_invariant(self.etcd, self.nodes, net)

    def test_ipv6_blocks_of_2_48_addresses_are_released(self):
        # Emptiness comes from the lease directory, not from probing each address.
        net = "rail-v6"
        ranges = [[{"subnet": "fd00:52::/64"}]]
        n = self.nodes[0]
        conf = n.conf(net, self.cluster(blockSizeV6=80, releaseAfter=0), ranges)
        rc, out, err = n.cni("ADD", "v0", conf)
        self.assertEqual(rc, 0, err)
        [block] = n.blocks(net)
        self.assertTrue(block.endswith("/80"))
        self.assertEqual(n.cni("DEL", "v0", conf)[0], 0)
        self.assertEqual(n.blocks(net), [])
        self.assertEqual(self.etcd.get_prefix(f"{PREFIX}/{net}/blocks/"), {})

    def test_bad_cluster_config_is_error_7_naming_the_field(self):
        n = self.nodes[0]
        ranges = [[{"subnet": "10.46.0.0/24"}]]
        cases = [({"blockSize": 20}, "ipam.cluster.blockSize"),
                 ({"etcd": {"endpoints": []}}, "ipam.cluster.etcd.endpoints"),
                 ({"etcd": {"endpoints": ["tcp://x:1"]}}, "ipam.cluster.etcd.endpoints[0]"),
                 ({"etcd": {"endpoints": self.etcd.endpoints, "tls": {"cert": "/x"}}},
                  "ipam.cluster.etcd.tls.key"),
                 ({"releaseAfter": -1}, "ipam.cluster.releaseAfter")]
        for extra, field in cases:
            rc, out, _ = n.cni("ADD", "bad", n.conf("rail-bad", self.cluster(**extra), ranges))
            self.assertEqual((rc, out.get("code")), (1, 7), (extra, out))
            self.assertIn(field, out["msg"])
        rc, out, err = n.cni("ADD", "held", n.conf("rail-bad", self.cluster(), ranges))
        self.assertEqual(rc, 0, err)
        os.remove(n.name_file)
        rc, out, _ = n.cni("ADD", "bad", n.conf("rail-bad", self.cluster(), ranges))
        self.assertEqual((rc, out.get("code")), (1, 11))
        self.assertIn(n.name_file, out["msg"])
        self.assertEqual(len(n.leases("rail-bad")), 1)  # only "held": the failed ADD left none
        # DEL does not need the node name: the lease goes all the same.
        rc, _, err = n.cni("DEL", "held", n.conf("rail-bad", self.cluster(), ranges))
        self.assertEqual(rc, 0, err)
        self.assertEqual(n.leases("rail-bad"), [])


if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
