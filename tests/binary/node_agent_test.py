#!/usr/bin/python3
"""rdmanet node-agent against the real kernel: pods made through the CNI protocol (the
rdmanet and rdmanet-ipam binaries, real veth "NICs" in throwaway netns), then what no
runtime cleans up, and the agent's metrics read with a real Prometheus text parser
(Debian's python3-prometheus-client).

Each check ends with the node as it must be: the live pods untouched (device in the pod,
record, hold, lease, pod files), the orphans gone (record, hold, lease, pod files). The
devices are veth pairs, which die with a netns that dies holding them; a physical VF
comes back to the host, and the PCI lab tier shows the agent bringing one home.

Usage: node_agent_test.py RDMANET RDMANET_IPAM   (as root)
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

NET = "agent-net"
SUBNET = "10.79.0"
results = []


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def check(name, ok, detail):
    results.append((name, ok))
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)


def run(*argv, check_rc=True, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check_rc and r.returncode != 0:
        raise RuntimeError("%s: %s %s" % (" ".join(argv), r.stdout, r.stderr))
    return r


def strace_safe(prefix):
    """A sanitizer build's leak checker cannot run under ptrace: off under strace."""
    return {"ASAN_OPTIONS": "detect_leaks=0"} if prefix and prefix[0] == "strace" else {}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, rdmanet, ipam):
        self.rdmanet = rdmanet
        self.work = tempfile.mkdtemp(prefix="rdmanet-agent.")
        self.tag = "%04x" % (os.getpid() % 0x10000)
        self.state = os.path.join(self.work, "state")
        self.data = os.path.join(self.work, "ipam")
        self.pods_dir = os.path.join(self.work, "pods")
        self.bin = os.path.join(self.work, "bin")
        self.networks = os.path.join(self.work, "networks")
        os.makedirs(self.bin)
        os.makedirs(self.networks)
        os.symlink(os.path.abspath(ipam), os.path.join(self.bin, "rdmanet-ipam"))
        self.devices = {}  # name -> MAC
        self.netns = set()
        self.port = free_port()
        self.agent = None
        self.holders = []  # processes keeping a pod netns alive without its pin
        self.conf = {
            "cniVersion": "1.0.0", "name": NET, "type": "rdmanet", "stateDir": self.state,
            "podInfoDir": self.pods_dir,
            "ipam": {"type": "rdmanet-ipam", "dataDir": self.data,
                     "ranges": [[{"subnet": SUBNET + ".0/24"}]]},
        }
        with open(os.path.join(self.networks, NET + ".conf"), "w") as f:
            json.dump(self.conf, f)

    # --- devices, pods, CNI calls ------------------------------------------------------
    def device(self, i):
        name = "na%s%d" % (self.tag, i)
        run("ip", "link", "add", name, "type", "veth", "peer", "name", name + "p")
        run("ip", "link", "set", name + "p", "up")  # the wire's far end: carrier in the pod
        with open("/sys/class/net/%s/address" % name) as f:
            self.devices[name] = f.read().strip()
        return name

    def pod(self, i):
        ns = "na%s-p%d" % (self.tag, i)
        run("ip", "netns", "add", ns)
        self.netns.add(ns)
        return ns

    def kill_pod(self, ns):
        run("ip", "netns", "del", ns)
        self.netns.discard(ns)

    def cni(self, command, cid, ns, dev, prefix=()):
        conf = dict(self.conf, device=dev)
        env = dict(os.environ, **strace_safe(prefix), CNI_COMMAND=command, CNI_CONTAINERID=cid,
                   CNI_NETNS="/run/netns/" + ns if ns else "", CNI_IFNAME="net1",
                   CNI_PATH=self.bin,
                   CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=team-agent;K8S_POD_NAME=%s;"
                            "K8S_POD_UID=uid-%s" % (cid, cid))
        return subprocess.run(list(prefix) + [self.rdmanet], input=json.dumps(conf), env=env,
                              capture_output=True, text=True)

    def attach(self, i):
        dev, ns = self.device(i), self.pod(i)
        r = self.cni("ADD", "c%d" % i, ns, dev)
        if r.returncode != 0:
            raise RuntimeError("ADD c%d: %s" % (i, r.stdout))
        return dev, ns

    # --- what the node holds -------------------------------------------------------------
    def records(self):
        d = os.path.join(self.state, NET)
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def holds(self):
        d = os.path.join(self.state, "holds")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def leases(self):
        out = []
        for root, _, files in os.walk(self.data):
            out += [f for f in files if f.startswith(SUBNET)]
        return sorted(out)

    def pod_dirs(self):
        names = os.listdir(self.pods_dir) if os.path.isdir(self.pods_dir) else []
        return sorted(n for n in names if not n.startswith("."))

    def in_pod(self, ns, dev):
        r = run("ip", "netns", "exec", ns, "cat", "/sys/class/net/net1/address", check_rc=False)
        return r.returncode == 0 and r.stdout.strip() == self.devices[dev]

    # --- the agent -----------------------------------------------------------------------
    def start_agent(self, grace=1, prefix=()):
        self.agent = subprocess.Popen(
            list(prefix) + [self.rdmanet, "node-agent", "--state-dir", self.state,
                            "--networks-dir", self.networks, "--cni-path", self.bin,
                            "--interval", "1", "--grace", str(grace),
                            "--listen", "127.0.0.1:%d" % self.port],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.work, "agent.log"), "a"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.metric("rdmanet_reconcile_rounds_total", default=0) >= 1:
                return
            time.sleep(0.1)
        fail("the agent did not answer on port %d\n%s" % (self.port, self.agent_log()))

    def stop_agent(self, sig=signal.SIGTERM):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(sig)
            self.agent.wait(10)
        self.agent = None

    def agent_log(self):
        with open(os.path.join(self.work, "agent.log")) as f:
            return f.read()[-3000:]

    def get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                        timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return None, ""

    def scrape(self):
        """{(name, sorted labels): value} through the Prometheus parser."""
        status, text = self.get("/metrics")
        if status != 200:
            return {}
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def metric(self, name, default=None, **labels):
        return self.scrape().get((name, tuple(sorted(labels.items()))), default)

    def wait_rounds(self, n):
        """Waits until the agent has finished n more rounds; returns the count reached. What
        the caller checks next assumes those rounds ran: when they did not, that fails."""
        start = self.metric("rdmanet_reconcile_rounds_total", default=0)
        deadline = time.monotonic() + 10 + 2 * n
        while time.monotonic() < deadline:
            now = self.metric("rdmanet_reconcile_rounds_total", default=0)
            if now >= start + n:
                return now
            time.sleep(0.1)
        check("agent-finished-%d-more-rounds" % n, False, "rounds %s after %d s, from %s" % (
            self.metric("rdmanet_reconcile_rounds_total"), 10 + 2 * n, start))
        return None

    def unpin_held(self, ns):
        """Removes the pod's pin while a process in it keeps the netns alive, as after
        containerd removed the pin with a process of the pod still running."""
        holder = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"])
        self.holders.append(holder)
        own = os.readlink("/proc/self/ns/net")
        for _ in range(200):
            try:
                if os.readlink("/proc/%d/ns/net" % holder.pid) != own:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        self.kill_pod(ns)
        return holder

    def cleanup(self):
        self.stop_agent(signal.SIGKILL)
        for holder in self.holders:
            holder.kill()
            holder.wait()
        for ns in list(self.netns):
            run("ip", "netns", "del", ns, check_rc=False)
        for dev in self.devices:
            run("ip", "link", "del", dev, check_rc=False)
        shutil.rmtree(self.work, ignore_errors=True)


def pool(node, what):
    return node.metric("rdmanet_ipam_pool_%s_addresses" % what, network=NET,
                       range_set="ipam.ranges[0]")


def scenario(node):
    live = [node.attach(i) for i in range(3)]
    node.start_agent(grace=1)

    # The metrics, against the node.
    m = node.scrape()
    counts = (m.get(("rdmanet_attachments", (("mode", "netdev"), ("network", NET)))),
              m.get(("rdmanet_held_devices", ())), pool(node, "used"), pool(node, "size"),
              pool(node, "free"))
    # (A /24 hands out 253: its network, broadcast and gateway addresses are reserved.)
    check("metrics-match-the-node",
          counts == (len(node.records()), len(node.holds()), len(node.leases()), 253, 253 - 3),
          "attachments, held devices, used, size, free = %s; records %d, holds %d, leases %d"
          % (counts, len(node.records()), len(node.holds()), len(node.leases())))
    status, body = node.get("/healthz")
    check("healthz", status == 200 and body.strip() == "ok", "%s %s" % (status, body.strip()))

    # A pod netns deleted without DEL: gone within grace + two rounds; the others untouched.
    dev1, ns1 = live[1]
    rounds_at = node.metric("rdmanet_reconcile_rounds_total")
    node.kill_pod(ns1)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(node.records()) != 2:
        time.sleep(0.1)
    rounds = node.metric("rdmanet_reconcile_rounds_total") - rounds_at
    others = all(node.in_pod(ns, dev) for dev, ns in (live[0], live[2]))
    check("orphan-torn-down-within-two-rounds-after-grace",
          len(node.records()) == 2 and len(node.holds()) == 2 and len(node.leases()) == 2
          and "uid-c1" not in node.pod_dirs() and rounds <= 3 and others,
          "after %d rounds (grace 1 s = 1 round): records %d, holds %d, leases %d, pod dirs %s;"
          " the other pods keep their devices: %s" % (rounds, len(node.records()),
                                                      len(node.holds()), len(node.leases()),
                                                      node.pod_dirs(), others))
    node.wait_rounds(1)
    check("teardown-counted",
          node.metric("rdmanet_orphan_teardowns_total", reason="netns-gone") == 1
          and pool(node, "used") == 2,
          "teardowns %s, used %s" % (node.metric("rdmanet_orphan_teardowns_total",
                                                 reason="netns-gone"), pool(node, "used")))

    # A record nobody can read is counted and left alone.
    junk = os.path.join(node.state, NET, "junk.json")
    with open(junk, "w") as f:
        f.write("{not json")
    os.chmod(junk, 0o600)
    node.wait_rounds(2)
    check("unreadable-record-reported-not-deleted",
          node.metric("rdmanet_unreadable_records") == 1 and os.path.exists(junk),
          "unreadable_records %s, file still there: %s"
          % (node.metric("rdmanet_unreadable_records"), os.path.exists(junk)))
    os.unlink(junk)

    # A pod netns without its pin but held by a process: the device and its address are
    # still in use there. The agent releases nothing (the teardown answers 11, counted)
    # until the process is gone and the netns with it.
    dev5, ns5 = node.attach(5)
    errors_at = node.metric("rdmanet_reconcile_errors_total", default=0, stage="teardown")
    holder = node.unpin_held(ns5)
    node.wait_rounds(4)
    still = node.devices[dev5] in run("nsenter", "-t", str(holder.pid), "-n", "ip", "-o", "link",
                                      "show", "net1", check_rc=False).stdout
    errors = node.metric("rdmanet_reconcile_errors_total", default=0, stage="teardown") - errors_at
    kept = (any(n.startswith("c5.") for n in node.records()), len(node.leases()),
            "uid-c5" in node.pod_dirs())
    check("netns-held-by-a-process-keeps-its-address",
          still and kept == (True, 3, True) and errors >= 2,
          "4 rounds with the pin gone and a process in the netns: device still there %s; "
          "record, leases, pod dir %s; teardown errors %s" % (still, kept, errors))
    holder.kill()
    holder.wait()
    node.wait_rounds(3)
    kept = (any(n.startswith("c5.") for n in node.records()), len(node.leases()),
            "uid-c5" in node.pod_dirs())
    check("netns-released-by-its-process-torn-down", kept == (False, 2, False),
          "record, leases, pod dir once the process exited: %s" % (kept,))

    # A lease without an rdmanet attachment (the IPAM plugin called by hand, its netns gone
    # since): rdmanet-ipam's reclaim rule, run by the agent, releases it.
    stray_ns = node.pod(90)
    env = dict(os.environ, CNI_COMMAND="ADD", CNI_CONTAINERID="stray", CNI_NETNS="/run/netns/" +
               stray_ns, CNI_IFNAME="net1", CNI_PATH=node.bin)
    subprocess.run([os.path.join(node.bin, "rdmanet-ipam")], input=json.dumps(node.conf),
                   env=env, capture_output=True, text=True, check=True)
    node.kill_pod(stray_ns)
    node.wait_rounds(2)
    check("stray-lease-reclaimed",
          len(node.leases()) == 2 and node.metric("rdmanet_ipam_leases_reclaimed_total",
                                                  network=NET, reason="stale (netns gone)") == 1,
          "leases %d, reclaimed %s" % (len(node.leases()), node.metric(
              "rdmanet_ipam_leases_reclaimed_total", network=NET, reason="stale (netns gone)")))

    # DEL killed half way (at its 2nd netlink send), then the netns deleted: the agent
    # finishes what DEL began.
    dev2, ns2 = live[2]
    r = node.cni("DEL", "c2", ns2, dev2,
                 prefix=("strace", "-f", "-qq", "-o", "/dev/null", "-e",
                         "inject=sendmsg:signal=KILL:when=2"))
    half = len(node.records()) == 2
    node.kill_pod(ns2)
    node.wait_rounds(3)
    check("del-killed-half-way-finished-by-the-agent",
          r.returncode != 0 and half and node.records() == [n for n in node.records()
                                                            if n.startswith("c0.")]
          and len(node.holds()) == 1 and len(node.leases()) == 1 and node.in_pod(*live[0][::-1]),
          "DEL status %d, record kept %s; after the agent: records %s, holds %d, leases %d"
          % (r.returncode, half, node.records(), len(node.holds()), len(node.leases())))

    # The agent killed mid-teardown (at its 2nd netlink send), then started again: the next
    # round finishes the job.
    node.stop_agent(signal.SIGKILL)
    dev3, ns3 = node.attach(3)
    node.kill_pod(ns3)
    once = run("strace", "-f", "-qq", "-o", "/dev/null", "-e", "inject=sendmsg:signal=KILL:when=2",
               node.rdmanet, "node-agent", "--once", "--grace", "0", "--state-dir", node.state,
               "--cni-path", node.bin, "--listen", "", check_rc=False,
               env=dict(os.environ, **strace_safe(["strace"])))
    killed_with_record = once.returncode != 0 and any(n.startswith("c3.") for n in node.records())
    node.start_agent(grace=1)
    node.wait_rounds(3)
    check("agent-killed-mid-teardown-then-finished",
          killed_with_record and not any(n.startswith("c3.") for n in node.records())
          and len(node.holds()) == 1 and len(node.leases()) == 1,
          "killed agent: status %d, record left %s; after the restart: records %s, leases %d"
          % (once.returncode, killed_with_record, node.records(), len(node.leases())))

    # ADD and DEL racing the agent (grace 0: it tears down as soon as a netns is gone). Even
    # rounds: one device ADDed and DELeted again and again while the agent's rounds run.
    # Odd rounds: the runtime's DEL comes after the netns is gone, racing the agent's
    # teardown of the same attachment (a new veth each time: it dies with the netns). The
    # runtime's calls always succeed and a live pod never loses its device.
    node.stop_agent()
    node.start_agent(grace=0)
    shared = node.device(4)
    bad = []
    retried = []
    for k in range(24):
        ns = node.pod(100 + k)
        dev = shared if k % 2 == 0 else node.device(200 + k)
        r = node.cni("ADD", "r%d" % k, ns, dev)
        if r.returncode != 0:
            bad.append("ADD %d: %s" % (k, r.stdout))
            continue
        time.sleep(random.uniform(0, 0.3))
        if not node.in_pod(ns, dev):
            bad.append("pod %d lost its device while alive" % k)
        if k % 2:
            node.kill_pod(ns)
            time.sleep(random.uniform(0, 1.2))
            r = node.cni("DEL", "r%d" % k, ns, dev)
            # `ip netns del` returns before the kernel has freed the netns; until it has,
            # the device is neither in the host nor gone, and DEL says 11 (try again later)
            # and keeps the record, as it must. A runtime retries; so does this.
            for _ in range(20):
                if r.returncode == 0 or json.loads(r.stdout or "{}").get("code") != 11:
                    break
                retried.append(k)
                time.sleep(0.25)
                r = node.cni("DEL", "r%d" % k, ns, dev)
        else:
            r = node.cni("DEL", "r%d" % k, ns, dev)
            node.kill_pod(ns)
        if r.returncode != 0:
            bad.append("DEL %d: %s" % (k, r.stdout))
    node.wait_rounds(2)
    torn = node.metric("rdmanet_orphan_teardowns_total", reason="netns-gone")
    check("add-del-racing-the-agent", not bad and len(node.records()) == 1
          and len(node.leases()) == 1 and node.in_pod(*live[0][::-1])
          and os.path.exists("/sys/class/net/" + shared),
          "24 ADD/DEL pairs, half with the netns deleted first (the agent tore %s of those "
          "down first; DEL said 11 and was retried %d times, the netns not yet freed): %s; "
          "records %s, leases %d" % (torn, len(retried), bad or "all succeeded",
                                     node.records(), len(node.leases())))

    # The last pod, by the runtime: nothing left.
    node.stop_agent()
    dev0, ns0 = live[0]
    r = node.cni("DEL", "c0", ns0, dev0)
    home = os.path.exists("/sys/class/net/" + dev0)
    check("nothing-left", r.returncode == 0 and home and not node.records() and not node.holds()
          and not node.leases() and not node.pod_dirs(),
          "last DEL %d, %s home %s" % (r.returncode, dev0, home))


def main():
    if len(sys.argv) != 3:
        fail("usage: node_agent_test.py RDMANET RDMANET_IPAM")
    if os.geteuid() != 0:
        fail("needs root (netns, links)")
    for tool in ("ip", "strace"):
        if not shutil.which(tool):
            fail(tool + " missing (tests/tools/deps.sh installs it)")
    node = Node(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
    try:
        scenario(node)
    finally:
        log = node.agent_log() if os.path.exists(os.path.join(node.work, "agent.log")) else ""
        node.cleanup()
    failed = [n for n, ok in results if not ok]
    if failed:
        print("agent log (end):\n" + log)
    print("%d checks, %d failed%s" % (len(results), len(failed),
                                     (": " + ", ".join(failed)) if failed else ""))
    sys.exit(1 if failed or not results else 0)


if __name__ == "__main__":
    main()
