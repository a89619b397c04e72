#!/usr/bin/python3
"""What one CNI call costs, counted rather than timed (issue #27 item 4): ADD, CHECK,
STATUS and DEL of rdmanet with rdmanet-ipam (netdev mode, one rail with source routing and
the pod's files) run under `strace -f`, and the calls that cost on a busy node are
counted: fsync/fdatasync (milliseconds each while another job writes to the disk),
execve (a process start each), and netlink dump requests (a read of every link, address
or route of a netns). Syscall counts are deterministic, so each is asserted exactly, and a
change that adds one fails here.

Then the node grows: 500 more links in the host and 500 more attachments (records, leases)
of the same network, and the same calls must make the same number of each counted call,
and of the calls whose number grows with what a scan reads (netlink replies read,
directories listed, files opened): the cost of a call does not grow with the node.

The targets (README "Durability" says what each sync protects):
  ADD   1 fsync (the lease: it must outlive a machine crash until the runtime's DEL),
        1 execve (rdmanet itself: rdmanet-ipam runs in process), no dump
  DEL   0 fsync, 1 execve, 1 dump (of the pod netns: finding the device under any name)
  CHECK 0 fsync, 1 execve, 1 dump (the pod netns' addresses, compared with prevResult)
  STATUS 0 fsync, 1 execve, no dump
  and no file replaced by a plain rename (ext4 writes it out within the call): an exchange

Usage: syscall_count_test.py RDMANET RDMANET_IPAM   (as root)
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

TAG = "sc%x" % os.getpid()
GROW = 500
results = []


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def check(name, ok, detail):
    results.append((name, ok))
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)


def sh(*argv, stdin=None):
    r = subprocess.run(argv, capture_output=True, text=True, input=stdin)
    if r.returncode != 0:
        raise RuntimeError("%s: %s %s" % (" ".join(argv), r.stdout, r.stderr))
    return r.stdout


DUMP = re.compile(r"nlmsg_flags=[^,]*(NLM_F_DUMP|NLM_F_ROOT\|NLM_F_MATCH|0x3[0-9a-f]{2}\b)")
SYSCALL = re.compile(r"^(?:\d+ +)?([a-z0-9_]+)\(")
# rename(old, new) and renameat(dirfd, old, dirfd, new): the new name, with its dirfd.
PLAIN_RENAME = re.compile(r'^(?:\d+ +)?rename(?:at)?\((?:(\w+), )?"[^"]*", (?:(\w+), )?"([^"]*)"')


def counts(trace_file):
    """Calls per syscall name in an `strace -f` output, and the netlink dump requests."""
    per = {}
    dumps = 0
    plain_targets = []
    with open(trace_file) as f:
        for line in f:
            m = SYSCALL.match(line)
            if not m:
                continue
            per[m.group(1)] = per.get(m.group(1), 0) + 1
            if m.group(1) in ("sendmsg", "sendto") and DUMP.search(line):
                dumps += 1
            r = PLAIN_RENAME.match(line)
            if r and " = 0" in line:
                plain_targets.append((r.group(2) or "", r.group(3)))
    per["dump"] = dumps
    per["sync"] = per.get("fsync", 0) + per.get("fdatasync", 0)
    # A plain rename onto a name a plain rename made earlier in the call replaces a file,
    # which ext4 flushes within the call (base/files.h move_into_place).
    per["replacing_renames"] = len(plain_targets) - len(set(plain_targets))
    return per


class Node:
    def __init__(self, rdmanet, ipam):
        self.work = tempfile.mkdtemp(prefix="rdmanet-syscalls.", dir="/var/tmp")
        self.bin = os.path.join(self.work, "bin")
        os.makedirs(self.bin)
        for b in (rdmanet, ipam):
            shutil.copy(b, self.bin)
        # No other IPAM plugin in CNI_PATH: an exec of rdmanet-ipam would fail loudly too.
        self.pod = TAG + "-pod"
        self.crowd = TAG + "-crowd"  # the other pods' attachments, in a netns of their own
        self.port = TAG + "a"
        self.parent = TAG + "m"
        self.calls = 0

    def setup(self):
        sh("ip", "netns", "add", self.pod)
        sh("ip", "netns", "add", self.crowd)
        # Far ends up, as cabled NICs' are: the rail has carrier at once (ADD waits for it).
        sh("ip", "link", "add", self.port, "type", "veth", "peer", "name", TAG + "b")
        sh("ip", "link", "add", self.parent, "type", "veth", "peer", "name", TAG + "n")
        for far in (TAG + "b", TAG + "n", self.parent):
            sh("ip", "link", "set", far, "up")

    def configs(self):
        state, ipam_dir = os.path.join(self.work, "state"), os.path.join(self.work, "ipam")
        for d in (state, ipam_dir):
            os.makedirs(d, mode=0o700)
        ipam_conf = {"type": "rdmanet-ipam", "dataDir": ipam_dir,
                     "ranges": [[{"subnet": "198.18.0.0/20"}]]}
        base = {"cniVersion": "1.1.0", "name": "rail0", "type": "rdmanet", "stateDir": state,
                "podInfoDir": os.path.join(self.work, "pods"), "ipam": ipam_conf}
        self.netdev = dict(base, device=self.port)
        self.macvlan = dict(base, device=self.parent, mode="macvlan")

    def cni(self, command, container, conf, ifname="net1", trace=None, pod=None):
        self.calls += 1
        # A sanitizer build's leak checker cannot run under ptrace.
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", CNI_COMMAND=command, CNI_CONTAINERID=container,
                   CNI_NETNS="/run/netns/" + (pod or self.pod), CNI_IFNAME=ifname,
                   CNI_PATH=self.bin,
                   CNI_ARGS="K8S_POD_NAMESPACE=team;K8S_POD_NAME=p-%s;"
                            "K8S_POD_UID=0f0e0d0c-0b0a-4909-8807-%012d" % (container, self.calls))
        stdin = dict(conf)
        if command == "CHECK":
            stdin["prevResult"] = self.prev
        argv = [os.path.join(self.bin, "rdmanet")]
        if trace:
            argv = ["strace", "-f", "-qq", "-s", "256", "-o", trace] + argv
        r = subprocess.run(argv, input=json.dumps(stdin), capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError("%s %s: %s %s" % (command, container, r.stdout, r.stderr))
        if command == "ADD":
            self.prev = json.loads(r.stdout)
        return r.stdout

    def traced(self, command, container, conf):
        trace = os.path.join(self.work, "%s-%d.trace" % (command, self.calls))
        self.cni(command, container, conf, trace=trace)
        return counts(trace)

    def cleanup(self):
        for ns in (self.pod, self.crowd):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        batch = "".join("link del %s\n" % n for n in
                        [TAG + "b", self.parent] + ["%sd%d" % (TAG, i) for i in range(GROW // 2)])
        subprocess.run(["ip", "-force", "-batch", "-"], input=batch, text=True, capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)


def one_round(node, label):
    """A warm ADD (not the network's first), CHECK, STATUS and DEL of the netdev rail."""
    add = node.traced("ADD", "ctr-" + label, node.netdev)
    check_ = node.traced("CHECK", "ctr-" + label, node.netdev)
    status = node.traced("STATUS", "", node.netdev)
    delete = node.traced("DEL", "ctr-" + label, node.netdev)
    return {"ADD": add, "CHECK": check_, "STATUS": status, "DEL": delete}


def main():
    if os.geteuid() != 0:
        fail("needs root (netns, links); it does not skip")
    if len(sys.argv) != 3:
        fail("usage: syscall_count_test.py RDMANET RDMANET_IPAM")
    if not shutil.which("strace"):
        fail("strace missing (tests/tools/deps.sh installs it)")
    node = Node(sys.argv[1], sys.argv[2])
    try:
        node.setup()
        node.configs()
        first = node.traced("ADD", "ctr-first", node.netdev)
        node.cni("DEL", "ctr-first", node.netdev)
        check("first-add-of-a-network", first["sync"] <= 2 and first["execve"] == 1,
              "%d fsync/fdatasync (the lease, and the IPAM store's new directories), "
              "%d execve" % (first["sync"], first["execve"]))

        small = one_round(node, "small")
        want = {"ADD": (1, 1, 0), "CHECK": (0, 1, 1), "STATUS": (0, 1, 0), "DEL": (0, 1, 1)}
        for cmd, (sync, execve, dumps) in want.items():
            got = small[cmd]
            check(cmd.lower() + "-counts",
                  (got["sync"], got.get("execve", 0), got["dump"]) == (sync, execve, dumps),
                  "fsync/fdatasync %d (want %d), execve %d (want %d), netlink dumps %d (want %d)"
                  % (got["sync"], sync, got.get("execve", 0), execve, got["dump"], dumps))

        check("add-replaces-files-by-exchange",
              small["ADD"]["replacing_renames"] == 0 and small["ADD"].get("renameat2", 0) > 0,
              "%d plain renames onto a name renamed onto before, %d RENAME_EXCHANGE" %
              (small["ADD"]["replacing_renames"], small["ADD"].get("renameat2", 0)))

        # The node grows: links in the host, attachments (records, leases) of the network.
        sh("ip", "-batch", "-", stdin="".join("link add %sd%d type veth peer name %se%d\n"
                                               % (TAG, i, TAG, i) for i in range(GROW // 2)))
        for i in range(GROW):
            node.cni("ADD", "ctr-crowd-%d" % i, node.macvlan, ifname="m%d" % i, pod=node.crowd)
        leases = len(os.listdir(os.path.join(node.work, "ipam", "rail0", "leases")))
        records = len(os.listdir(os.path.join(node.work, "state", "rail0")))
        big = one_round(node, "big")
        scaled = ("sync", "execve", "dump", "recvmsg", "recvfrom", "getdents64", "openat",
                  "sendmsg", "sendto")
        for cmd in ("ADD", "CHECK", "STATUS", "DEL"):
            diff = {k: (small[cmd].get(k, 0), big[cmd].get(k, 0)) for k in scaled
                    if small[cmd].get(k, 0) != big[cmd].get(k, 0)}
            check(cmd.lower() + "-does-not-grow-with-the-node", not diff,
                  "with %d more host links, %d leases and %d records: %s" %
                  (GROW, leases, records, diff or "the same counts of %s" % ", ".join(scaled)))
    finally:
        node.cleanup()
    failed = [n for n, ok in results if not ok]
    print("syscall counts: %d checks, %d failed" % (len(results), len(failed)))
    sys.exit(1 if failed or not results else 0)


if __name__ == "__main__":
    main()
