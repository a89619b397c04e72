#!/usr/bin/python3
"""The Kubernetes node path: containerd's CRI plugin runs rdmanet as kubelet asks it to.

A private containerd (Debian 12's 1.6, see crinode.py) has rdmanet + rdmanet-ipam as its
pod network (the first conflist in its CNI directory, cniVersion 1.0.0). This program
calls it over CRI v1 in kubelet's order and, after each step, compares the node with
what it must be: the device in the pod or back in the host under its own name, MAC and
MTU; rdmanet's records, holds and pod files; rdmanet-ipam's leases; libcni's result
cache; containerd's netns pins.

The "NICs" are veth pairs whose far ends sit on a bridge in a peer netns (10.77.0.254):
a veth dies with a netns that dies holding it, where a physical NIC or VF comes back to
the host as dev<N>; the PCI lab tier shows that with igb VFs, this one says which it is.

Usage: cri_test.py RDMANET RDMANET_IPAM   (as root; fails loudly otherwise)
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crinode  # noqa: E402
from crinode import fail, run  # noqa: E402

SUBNET = "10.77.0"
PEER_IP = SUBNET + ".254"

results = []


def check(name, ok, detail):
    results.append((name, ok))
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)


class Node:
    def __init__(self, rdmanet, ipam):
        self.work = tempfile.mkdtemp(prefix="rdmanet-cri.")
        self.tag = "%04x" % (os.getpid() % 0x10000)
        self.peer_ns = "rdmanet-cri-" + self.tag
        self.state_dir = os.path.join(self.work, "rdmanet-state")
        self.ipam_dir = os.path.join(self.work, "ipam")
        self.pod_dir = os.path.join(self.work, "pods")
        self.calls = os.path.join(self.work, "cni-calls")
        self.pids = os.path.join(self.work, "cni-pids")
        self.devices = {}
        self.cd = crinode.Containerd(self.work)
        crinode.compile_cri_api(os.path.join(self.work, "gen"))
        import api_pb2
        import api_pb2_grpc
        import grpc
        self.pb = api_pb2
        self.grpc = grpc
        self._stubs = api_pb2_grpc
        self.rt = None
        # The plugins, through a recorder of the calls containerd makes.
        self.rdmanet = rdmanet
        self.ipam = ipam
        self._wrap("rdmanet", rdmanet)
        self._wrap("rdmanet-ipam", ipam)
        self._wrap("slow-ipam", ipam, delay=3)
        # containerd sets up the pod's lo with the reference loopback plugin.
        os.symlink("/usr/lib/cni/loopback", os.path.join(self.cd.bin_dir, "loopback"))
        crinode.build_sandbox_image(os.path.join(self.work, "pause.tar"))
        run("ip", "netns", "add", self.peer_ns)
        self.nsrun("ip", "link", "add", "br0", "type", "bridge")
        self.nsrun("ip", "addr", "add", PEER_IP + "/24", "dev", "br0")
        self.nsrun("ip", "link", "set", "br0", "up")

    def _wrap(self, name, target, delay=0):
        path = os.path.join(self.cd.bin_dir, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho \"%s $CNI_COMMAND $CNI_CONTAINERID $CNI_NETNS\" >> %s\n"
                    % (name, self.calls))
            # Who runs the call (pid and start time, kept through the exec below).
            f.write("echo \"%s $CNI_COMMAND $CNI_CONTAINERID $$ $(cut -d' ' -f22 /proc/$$/stat)\""
                    " >> %s\n" % (name, self.pids))
            if delay:
                f.write("[ \"$CNI_COMMAND\" = ADD ] && sleep %d\n" % delay)
            f.write("exec %s \"$@\"\n" % target)
        os.chmod(path, 0o755)

    def nsrun(self, *argv, check=True):
        return run("ip", "netns", "exec", self.peer_ns, *argv, check=check)

    # --- devices and the network config -------------------------------------------------
    def add_device(self, i):
        """A "NIC": a veth whose far end is on the peer bridge."""
        name, far = "cr%s%d" % (self.tag, i), "cr%s%dp" % (self.tag, i)
        run("ip", "link", "add", name, "type", "veth", "peer", "name", far)
        run("ip", "link", "set", far, "netns", self.peer_ns)
        self.nsrun("ip", "link", "set", far, "master", "br0", "up")
        run("ip", "link", "set", name, "mtu", "1450")
        self.devices[name] = self.link(name)
        return name

    def link(self, name):
        """(ifindex, MAC, MTU) of a host link, or None."""
        try:
            with open("/sys/class/net/%s/ifindex" % name) as f:
                index = int(f.read())
            with open("/sys/class/net/%s/address" % name) as f:
                mac = f.read().strip()
            with open("/sys/class/net/%s/mtu" % name) as f:
                mtu = int(f.read())
            return (index, mac, mtu)
        except OSError:
            return None

    def conflist(self, device, version="1.0.0", ipam="rdmanet-ipam", name="rdmanet-cri"):
        return {
            "cniVersion": version, "name": name,
            "plugins": [{
                "type": "rdmanet", "device": device, "stateDir": self.state_dir,
                "podInfoDir": self.pod_dir,
                "ipam": {"type": ipam, "dataDir": self.ipam_dir,
                         "ranges": [[{"subnet": SUBNET + ".0/24", "rangeEnd": SUBNET + ".250"}]]},
            }],
        }

    def use_network(self, conf):
        """Makes conf containerd's pod network and waits until it has loaded it (its verbose
        Status shows the loaded config)."""
        path = os.path.join(self.cd.conf_dir, "10-rdmanet.conflist")
        with open(path + ".tmp", "w") as f:
            json.dump(conf, f)
        os.rename(path + ".tmp", path)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.loaded_network() == conf:
                return
            time.sleep(0.05)
        fail("containerd did not load the new network config: %s" % self.loaded_network())

    def loaded_network(self):
        """The pod network's config as containerd has loaded it (its verbose Status)."""
        info = self.rt.Status(self.pb.StatusRequest(verbose=True)).info
        for net in json.loads(info.get("cniconfig", "{}")).get("Networks") or []:
            if net.get("IFName") == "eth0":
                return json.loads(net["Config"]["Source"])
        return None

    # --- containerd -------------------------------------------------------------------------
    def start(self):
        self.cd.start()
        if self.rt is None:
            self.cd.ctr("images", "import", os.path.join(self.work, "pause.tar"))
        channel = self.grpc.insecure_channel("unix://" + self.cd.sock)
        self.rt = self._stubs.RuntimeServiceStub(channel)

    def restart(self, sig):
        self.cd.stop(sig)
        self.start()

    def sandbox_config(self, name, uid, attempt=0):
        pb = self.pb
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="team-cri",
                                           attempt=attempt),
            hostname=name, log_directory=os.path.join(self.work, "logs", uid),
            linux=pb.LinuxPodSandboxConfig())

    def run_pod(self, name, uid=None, attempt=0, timeout=60):
        """RunPodSandbox; returns (sandbox id, None) or (None, the gRPC error's text)."""
        cfg = self.sandbox_config(name, uid or "uid-" + name, attempt)
        try:
            r = self.rt.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg), timeout=timeout)
            return r.pod_sandbox_id, None
        except self.grpc.RpcError as e:
            return None, e.details()

    def status(self, sid):
        r = self.rt.PodSandboxStatus(self.pb.PodSandboxStatusRequest(pod_sandbox_id=sid,
                                                                     verbose=True))
        info = json.loads(r.info.get("info", "{}"))
        return r.status, info

    def stop_pod(self, sid):
        self.rt.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=sid), timeout=60)

    def remove_pod(self, sid):
        self.rt.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=sid), timeout=60)

    def stop_and_remove(self, sid):
        self.stop_pod(sid)
        self.remove_pod(sid)

    def pod_links(self, sid):
        """The pod netns's links as `ip -o link` prints them (through the sandbox's pid)."""
        _, info = self.status(sid)
        pid = info.get("pid", 0)
        if not pid:
            return ""
        return run("nsenter", "-t", str(pid), "-n", "ip", "-o", "link", check=False).stdout

    def exec_in_container(self, sid, name, argv):
        """CreateContainer + StartContainer (sleeping), then ExecSync argv in it."""
        pb = self.pb
        cfg = self.sandbox_config(name, "uid-" + name)
        ccfg = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="app"),
            image=pb.ImageSpec(image=crinode.SANDBOX_IMAGE),
            command=["/bin/sleep", "600"], log_path="app.log", linux=pb.LinuxContainerConfig())
        cid = self.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=ccfg, sandbox_config=cfg), timeout=60).container_id
        self.rt.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=60)
        r = self.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=argv, timeout=10),
                             timeout=30)
        return r.exit_code, r.stdout.decode() + r.stderr.decode()

    # --- what the node holds ------------------------------------------------------------
    def records(self):
        out = []
        for root, _, files in os.walk(self.state_dir):
            out += [os.path.relpath(os.path.join(root, f), self.state_dir) for f in files
                    if f.endswith(".json")]
        return sorted(out)

    def leases(self):
        out = []
        for root, _, files in os.walk(self.ipam_dir):
            out += [f for f in files if f.startswith(SUBNET)]
        return sorted(out)

    def cache(self):
        d = "/var/lib/cni/results"
        names = os.listdir(d) if os.path.isdir(d) else []
        return sorted(n for n in names if n.startswith("rdmanet-cri-"))

    def cached_result(self, sid):
        """libcni's cache entry for the sandbox's pod network."""
        path = "/var/lib/cni/results/rdmanet-cri-%s-eth0" % sid
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def pins(self):
        d = os.path.join(self.work, "state", "io.containerd.grpc.v1.cri", "netns")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def pod_files(self):
        names = os.listdir(self.pod_dir) if os.path.isdir(self.pod_dir) else []
        return sorted(n for n in names if n != ".lock")  # the directory's lock stays

    def calls_for(self, sid, plugin="rdmanet"):
        """The CNI commands containerd ran for the sandbox, and whether it passed a netns."""
        try:
            with open(self.calls) as f:
                rows = [line.split() for line in f]
        except OSError:
            return []
        return [r[1] + ("" if len(r) > 3 else " (no netns)") for r in rows
                if len(r) > 2 and r[0] == plugin and r[2] == sid]

    def calls_of(self, plugin, command):
        """The sandbox ids of the plugin's `command` calls, in order."""
        try:
            with open(self.calls) as f:
                rows = [line.split() for line in f]
        except OSError:
            return []
        return [r[2] for r in rows if len(r) > 2 and r[0] == plugin and r[1] == command]

    def wait_calls_ended(self, sid, plugin="rdmanet", limit=30):
        """Waits, at most `limit` s in all, until every `plugin` process containerd started
        for the sandbox has ended; returns the pids of those still running."""
        try:
            with open(self.pids) as f:
                rows = [line.split() for line in f]
        except OSError:
            return []
        deadline = time.monotonic() + limit
        running = []
        for r in rows:
            if len(r) == 5 and r[0] == plugin and r[2] == sid and not crinode.wait_for_end(
                    int(r[3]), r[4], max(0.0, deadline - time.monotonic())):
                running.append(int(r[3]))
        return running

    def wait_for_call(self, sid, command, plugin="rdmanet", limit=30):
        """Waits, at most `limit` s, until containerd has started `command` for the sandbox."""
        deadline = time.monotonic() + limit
        while command not in self.calls_for(sid, plugin) and time.monotonic() < deadline:
            time.sleep(0.05)
        return command in self.calls_for(sid, plugin)

    def last_container(self, command):
        """The container id of rdmanet's last `command` call."""
        with open(self.calls) as f:
            rows = [line.split() for line in f]
        ids = [r[2] for r in rows if len(r) > 2 and r[0] == "rdmanet" and r[1] == command]
        return ids[-1] if ids else ""

    def home(self, name):
        """Whether the device is in the host under its name with its MAC and MTU."""
        now = self.link(name)
        want = self.devices[name]
        return now is not None and now[1:] == want[1:], now

    def clean(self, live=0):
        """Nothing held beyond `live` running pods: records, leases, cache entries, pins and
        pod directories each number `live`; every device not in a pod is home."""
        held = {"records": self.records(), "leases": self.leases(), "cache": self.cache(),
                "pins": self.pins(), "pods": self.pod_files()}
        bad = {k: v for k, v in held.items() if len(v) != live}
        return not bad, bad

    def cleanup(self):
        # Everything the test made: pods (containerd, shims, sandboxes), devices, the peer
        # netns, the work directory. Tolerant: a failed test may have left any of it.
        if self.rt is not None and self.cd.proc and self.cd.proc.poll() is None:
            try:
                for s in self.rt.ListPodSandbox(self.pb.ListPodSandboxRequest(), timeout=10).items:
                    try:
                        self.stop_and_remove(s.id)
                    except self.grpc.RpcError:
                        pass
            except self.grpc.RpcError:
                pass
        self.cd.kill_everything()
        for name in self.devices:
            run("ip", "link", "del", name, check=False)
        run("ip", "netns", "del", self.peer_ns, check=False)
        run("sh", "-c", "grep ' %s/' /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r umount -l"
            % self.work, check=False)
        shutil.rmtree(self.work, ignore_errors=True)


def main():
    if len(sys.argv) != 3:
        fail("usage: cri_test.py RDMANET RDMANET_IPAM")
    if os.geteuid() != 0:
        fail("needs root (containerd, netns, links)")
    for tool in ("containerd", "ctr", "runc", "containerd-shim-runc-v2", "nsenter", "ip"):
        if not shutil.which(tool):
            fail(tool + " missing (tests/tools/deps.sh installs it)")
    rdmanet, ipam = (os.path.abspath(p) for p in sys.argv[1:])
    crinode.enter_private_mounts()
    node = Node(rdmanet, ipam)
    try:
        node.start()
        import cri_checks
        cri_checks.run_all(node, check)
    finally:
        node.cleanup()
    failed = [n for n, ok in results if not ok]
    print("%d checks, %d failed%s" % (len(results), len(failed),
                                     (": " + ", ".join(failed)) if failed else ""))
    sys.exit(1 if failed or not results else 0)


if __name__ == "__main__":
    main()
