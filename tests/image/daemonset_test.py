#!/usr/bin/env python3
"""The DaemonSet as a kubelet runs it, from the image deploy/Containerfile builds (the
image_build tier makes both tags): deploy/base rendered with `kubectl kustomize`, every
container of its pod template run under podman on a node made of a network namespace and
a root directory (node.py, podspec.py), then an upgrade to the next image and an uninstall
while pods are attached.

Checks, in the order a node lives through them:
  1. the template is applied field by field (podspec.py refuses any field it does not
     apply); overlays that change the template run their changed containers too;
  2. node-prep reports the node (this kernel has no RDMA subsystem: it says so);
  3. install puts both binaries (stripped, the image's own bytes) and the node name in
     place, and its readiness probe passes within its own timeout under its CPU limit;
  4. the node agent runs the installed binary chrooted in the host root with exactly the
     capabilities the manifest adds, answers /healthz 200 on the node's port, serves
     metrics, and tears down an attachment whose netns was deleted without DEL;
  5. upgrade: the old pod is terminated and the new image's pod installs its binaries while
     CNI calls run in a loop (each sees the old or the new binary) and while an old binary
     is executing; DEL by the new binary undoes an ADD of the old one;
  6. uninstall (UNINSTALL=true on the install container): the binaries stay while an
     attachment is left, go once its DEL came; the state directory stays.
Usage: daemonset_test.py      (root; the image_build tier first)"""
import copy
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import yaml

sys.path.insert(0, os.path.dirname(__file__))
import imagelib  # noqa: E402
import node as nodelib  # noqa: E402
import podspec  # noqa: E402

failures = []
PODS = []  # every pod started, for the liveness restarts check at the end


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + (f"  [{detail}]" if detail and not cond else ""),
          flush=True)
    if not cond:
        failures.append(what)
    return cond


def info(msg):
    print("     " + msg, flush=True)


def render(kustomization_dir):
    out = subprocess.run(["kubectl", "kustomize", kustomization_dir], check=True,
                         capture_output=True, text=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    return [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "rdmanet"][0]


def render_with(base_dir, image_tag=None, install_env=None):
    """deploy/base as a user changes it: `kustomize edit set image` / `kubectl set env`."""
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        subprocess.run(["cp", "-r", base_dir, base], check=True)
        k = os.path.join(base, "kustomization.yaml")
        doc = yaml.safe_load(open(k))
        if image_tag:
            doc["images"][0]["newTag"] = image_tag
        yaml.safe_dump(doc, open(k, "w"))
        ds = render(base)
    if install_env:
        for c in ds["spec"]["template"]["spec"]["containers"]:
            if c["name"] == "install":
                for name, value in install_env.items():
                    c["env"] = [e for e in c["env"] if e["name"] != name] + [
                        {"name": name, "value": value}]
    return ds


CAP_NAMES = ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID",
             "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST",
             "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO",
             "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
             "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE",
             "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
             "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"]


def process_caps(pid):
    status = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines()
                  if ":\t" in line)
    out = {}
    for field in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb", "NoNewPrivs"):
        v = status.get(field, "").strip()
        if field == "NoNewPrivs":
            out[field] = v
            continue
        bits = int(v, 16)
        out[field] = {CAP_NAMES[i] for i in range(len(CAP_NAMES)) if bits >> i & 1}
    return out


def http_get(node, path, port=9520, timeout=5):
    r = subprocess.run(["ip", "netns", "exec", node.netns, "python3", "-c",
                        "import sys, urllib.request\n"
                        f"r = urllib.request.urlopen('http://{nodelib.NODE_IP}:{port}{path}', "
                        f"timeout={timeout})\n"
                        "sys.stdout.write(str(r.status) + '\\n' + r.read().decode())\n"],
                       capture_output=True, text=True, timeout=timeout + 20)
    if r.returncode != 0:
        return 0, r.stderr[-300:]
    status, _, body = r.stdout.partition("\n")
    return int(status), body


def image_file(podman, image, path):
    """The bytes of a file in an image."""
    r = subprocess.run(podman.base + ["run", "--rm", "--network", "none", "--entrypoint",
                                      "cat", image, path], env=podman.env, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"cat {path} in {image}: {r.stderr.decode()[-300:]}")
    return r.stdout


def is_stripped(path):
    sections = subprocess.run(["readelf", "-S", "-W", path], capture_output=True,
                              text=True).stdout
    return ".symtab" not in sections and ".debug_" not in sections


class CallerLoop(threading.Thread):
    """CNI calls in a tight loop while the binaries are replaced: `rdmanet version` and a
    CNI VERSION call of rdmanet-ipam, exec'd from the node's bin dir."""

    def __init__(self, node):
        super().__init__(daemon=True)
        self.node, self.stop, self.outputs, self.errors = node, threading.Event(), {}, []

    def run(self):
        bin_dir = self.node.path("/opt/cni/bin")
        while not self.stop.is_set():
            for cmd, env in (([f"{bin_dir}/rdmanet", "version"], {}),
                             ([f"{bin_dir}/rdmanet-ipam"], {"CNI_COMMAND": "VERSION"})):
                try:
                    r = subprocess.run(cmd, env=dict(os.environ, **env), capture_output=True,
                                       text=True, input='{"cniVersion":"1.0.0"}', timeout=10)
                    key = r.stdout.strip() if r.returncode == 0 else f"rc {r.returncode}"
                    if r.returncode != 0:
                        self.errors.append(f"{cmd[0]}: rc {r.returncode} {r.stderr[-200:]}")
                except OSError as e:
                    key = f"exec: {e.strerror}"
                    self.errors.append(f"{cmd[0]}: {e}")
                self.outputs[key] = self.outputs.get(key, 0) + 1


def pod_config(device, network="rail0"):
    return {"cniVersion": "1.0.0", "name": network, "type": "rdmanet", "device": device,
            "ipam": {"type": "rdmanet-ipam", "ranges": [[{"subnet": "10.77.0.0/24"}]]}}


def leases(node, network="rail0"):
    d = node.path(f"/var/lib/cni/networks/{network}/leases")
    if not os.path.isdir(d):
        return []
    return sorted(f for f in os.listdir(d) if re.match(r"^\d+\.\d+\.\d+\.\d+$", f))


def records(node):
    d = node.path("/var/lib/cni/rdmanet")
    out = []
    for net in (os.listdir(d) if os.path.isdir(d) else []):
        if net in ("holds", "locks") or net.startswith("."):
            continue
        out += [f"{net}/{f}" for f in os.listdir(os.path.join(d, net)) if f.endswith(".json")]
    return sorted(out)


def template_overlays_differ(base_ds):
    """Overlays whose DaemonSet template differs from the base's, with the containers that
    differ (by name)."""
    out = []
    overlays = os.path.join(imagelib.REPO, "deploy/overlays")
    for o in sorted(os.listdir(overlays)):
        ds = render(os.path.join(overlays, o))
        t, bt = ds["spec"]["template"], base_ds["spec"]["template"]
        if t == bt:
            continue
        changed = []
        for kind in ("initContainers", "containers"):
            base_by_name = {c["name"]: c for c in bt["spec"].get(kind, [])}
            for c in t["spec"].get(kind, []):
                if base_by_name.get(c["name"]) != c:
                    changed.append((kind, c))
        out.append((o, ds, changed))
    return out


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root (network namespaces, mounts, podman)")
        return 1
    podman = imagelib.Podman()
    for tag in (imagelib.IMAGE, imagelib.IMAGE_NEXT):
        if not podman.exists(tag):
            print(f"FAIL: image {tag} missing: the image_build tier makes it")
            return 1
    base_dir = os.path.join(imagelib.REPO, "deploy/base")
    ds = render(base_dir)
    template = ds["spec"]["template"]
    tag = f"r{os.getpid() % 100000}"

    # 1. The translator refuses what it does not apply (a field a kubelet would honour).
    bad = copy.deepcopy(template)
    bad["spec"]["containers"][0]["lifecycle"] = {"preStop": {"exec": {"command": ["true"]}}}
    try:
        podspec.Pod(podman, bad, None, "refused")
        check(False, "a template field the runner does not apply is refused")
    except podspec.Refused as e:
        check("lifecycle" in str(e), "a template field the runner does not apply is refused",
              str(e))

    with nodelib.NodeEnv(tag) as node:
        knode = podspec.Node(f"node-{tag}", node.netns, nodelib.NODE_IP, node.root)
        run_overlays(podman, node, knode, ds, tag)
        pod = podspec.Pod(podman, template, knode, f"rdmanet-{tag}-a", image=imagelib.IMAGE)
        PODS.append(pod)
        t0 = time.monotonic()
        pod.start()
        try:
            run_node(podman, node, knode, pod, base_dir, ds, tag, t0)
        finally:
            pod.stop()
            # Whatever a failure left running (containers are named after the test's pods).
            for name in podman("ps", "-a", "--format", "{{.Names}}", check=False).stdout.split():
                if name.startswith(f"rdmanet-{tag}-"):
                    podman("rm", "-f", name, check=False)
        restarts = {f"{p.name}/{c}": s.restarts for p in PODS for c, s in p.states.items()
                    if s.restarts}
        check(not restarts, "no container was restarted by its liveness probe", str(restarts))
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


def run_overlays(podman, node, knode, base_ds, tag):
    """Overlays that change the template: the whole template is checked field by field, the
    changed init containers run (node-prep with --exclusive --live and NET_ADMIN)."""
    for name, ds, changed in template_overlays_differ(base_ds):
        pod = podspec.Pod(podman, ds["spec"]["template"], knode, f"rdmanet-{tag}-{name}",
                          image=imagelib.IMAGE)
        others = [c["name"] for kind, c in changed if kind != "initContainers"]
        check(not others, f"overlay {name} changes only init containers", str(others))
        for kind, c in changed:
            if kind == "initContainers":
                pod.run_init(c)
        conf = node.path("/etc/modprobe.d/rdmanet-netns.conf")
        text = open(conf).read() if os.path.exists(conf) else ""
        log = pod.logs.get("node-prep", "")
        check("options ib_core netns_mode=0" in text,
              f"overlay {name}: node-prep writes the host's modprobe.d option", log[-400:])
        check("live switch to exclusive refused" in log,
              f"overlay {name}: node-prep tries the live switch and reports the kernel's answer",
              log[-400:])
        if os.path.exists(conf):
            os.unlink(conf)


def run_node(podman, node, knode, pod, base_dir, ds, tag, t0):
    # 2. node-prep's report.
    report = pod.logs.get("node-prep", "")
    check("netns mode: unknown (ib_core not loaded) (configured for next boot: shared)" in report,
          "node-prep reports the node's RDMA netns mode", report[-500:])
    check("no RDMA devices visible" in report and "rdma netns mode (netlink):" in report,
          "node-prep reports devices and the kernel's answer over netlink", report[-500:])

    # 3. install: ready within its own probe timeout, the image's bytes in place.
    ready = pod.wait_ready("install", 90)
    check(ready, f"install becomes ready ({time.monotonic() - t0:.1f} s after the pod started)",
          pod.logs_of("install")[-800:])
    probes = [r for r in pod.states["install"].results if r[1] == "readinessProbe"]
    install_c = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "install"][0]
    timeout = install_c["readinessProbe"].get("timeoutSeconds", 1)
    took = max((r[3] for r in probes if r[2]), default=0)
    info(f"readiness probe (install.sh --check under cpu {install_c['resources']['limits']['cpu']}):"
         f" {took:.2f} s of its {timeout} s timeout")
    for name in ("rdmanet", "rdmanet-ipam"):
        p = node.path(f"/opt/cni/bin/{name}")
        ok = os.path.isfile(p) and open(p, "rb").read() == image_file(
            podman, imagelib.IMAGE, f"/opt/rdmanet/bin/{name}")
        check(ok, f"install put the image's {name} into the host's /opt/cni/bin")
        check(ok and os.stat(p).st_mode & 0o777 == 0o755 and is_stripped(p),
              f"{name} is installed 0755 and stripped")
    r = subprocess.run([node.path("/opt/cni/bin/rdmanet"), "version"], capture_output=True,
                       text=True)
    check(r.stdout.strip() == "rdmanet 0.1.0", "the installed rdmanet is the image's version",
          r.stdout + r.stderr)
    nn = node.path("/var/lib/rdmanet/node-name")
    check(os.path.exists(nn) and open(nn).read() == f"{knode.name}\n",
          "install wrote spec.nodeName to /var/lib/rdmanet/node-name")
    check(os.stat(node.path("/var/lib/cni/rdmanet")).st_mode & 0o777 == 0o700,
          "the state dir is 0700")

    # 4. The node agent.
    agent_c = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "node-agent"][0]
    deadline = time.monotonic() + 30
    status, body = 0, ""
    while time.monotonic() < deadline and status != 200:
        ok, _, detail = pod.probe_once(agent_c, "livenessProbe")
        status = 200 if ok else 0
        if status != 200:
            time.sleep(0.5)
    check(status == 200, "the node agent answers its liveness probe: /healthz 200 on the node's "
          "port", detail + pod.logs_of("node-agent")[-600:])
    pid = pod.pid_of("node-agent")
    want = set(agent_c["securityContext"]["capabilities"]["add"])
    caps = process_caps(pid) if pid else {}
    check(caps.get("CapEff") == want and caps.get("CapBnd") == want and caps.get("CapPrm") == want,
          "the node agent has exactly the capabilities the manifest adds",
          f"effective {sorted(caps.get('CapEff', []))} bounding {sorted(caps.get('CapBnd', []))}, "
          f"want {sorted(want)}")
    check(caps.get("NoNewPrivs") == "1", "the node agent runs with no_new_privs "
          "(allowPrivilegeEscalation: false)")
    # The same file as the node's /opt/cni/bin/rdmanet, seen as /host/... in the container,
    # with the node's root as its root.
    exe, same = "", False
    if pid:
        exe = os.readlink(f"/proc/{pid}/exe")
        a, b = os.stat(f"/proc/{pid}/exe"), os.stat(node.path("/opt/cni/bin/rdmanet"))
        same = (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
        ra, rb = os.stat(f"/proc/{pid}/root"), os.stat(node.root)
        same = same and (ra.st_dev, ra.st_ino) == (rb.st_dev, rb.st_ino)
    check(same and exe == "/host/opt/cni/bin/rdmanet",
          "the node agent runs the node's installed rdmanet, chrooted in the host root", exe)
    status, metrics = http_get(node, "/metrics")
    check(status == 200 and "rdmanet_reconcile_rounds_total" in metrics,
          "the node agent serves Prometheus metrics on the node's port", metrics[:300])

    # Two pods through the installed binary (image N); pod B's netns goes without DEL.
    dev_a, dev_b, dev_c = node.add_device(0), node.add_device(1), node.add_device(2)
    ns_a, ns_b = node.add_pod_netns("a"), node.add_pod_netns("b")
    rc_a, out_a, err_a = node.cni("ADD", pod_config(dev_a), "pod-a", ns_a)
    rc_b, out_b, err_b = node.cni("ADD", pod_config(dev_b), "pod-b", ns_b)
    check(rc_a == 0 and rc_b == 0 and node.link_in(ns_a, "net1") and node.link_in(ns_b, "net1"),
          "two pods get their devices through image N's installed binary", err_a + err_b)
    check(len(leases(node)) == 2 and len(records(node)) == 2, "two leases and two records",
          f"{leases(node)} {records(node)}")
    subprocess.run(["ip", "netns", "del", ns_b], check=True)
    node.pods.remove(ns_b)
    orphaned_at = time.monotonic()

    # A binary executing while it is replaced: a node agent of its own (empty state dir),
    # started from the installed path.
    scratch = node.path("/tmp/agent2")
    os.makedirs(scratch, mode=0o700)
    old_agent = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{node.netns}", "chroot", node.root,
         "/opt/cni/bin/rdmanet", "node-agent", "--state-dir", "/tmp/agent2", "--interval", "1",
         "--listen", f"{nodelib.NODE_IP}:9521"], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        upgrade(podman, node, knode, pod, base_dir, tag, ns_a, dev_a, old_agent, orphaned_at,
                dev_c, (dev_b, ns_b))
    finally:
        old_agent.kill()
        old_agent.wait()


def upgrade(podman, node, knode, pod, base_dir, tag, ns_a, dev_a, old_agent, orphaned_at, dev_c,
            orphan):
    # 5. Upgrade: the rollout replaces the pod with one of the next image.
    time.sleep(1.5)
    status, _ = http_get(node, "/healthz", port=9521)
    check(status == 200, "an old binary runs (a second agent started from /opt/cni/bin)")
    loop = CallerLoop(node)
    loop.start()
    time.sleep(0.5)
    t = time.monotonic()
    pod.stop()
    stopped = time.monotonic() - t
    check(stopped < 20, f"the old pod ends on SIGTERM ({stopped:.1f} s; grace period 30 s)")
    ds2 = render_with(base_dir, image_tag=imagelib.IMAGE_NEXT.split(":")[1])
    pod2 = podspec.Pod(podman, ds2["spec"]["template"], knode, f"rdmanet-{tag}-b",
                       image=imagelib.IMAGE_NEXT)
    PODS.append(pod2)
    pod2.start()
    try:
        ready = pod2.wait_ready("install", 90)
        time.sleep(1)
        loop.stop.set()
        loop.join()
        check(ready, "the next image's install becomes ready")
        old, new = "rdmanet 0.1.0", "rdmanet 0.1.1-next"
        check(not loop.errors, f"every CNI call during the upgrade ran ({sum(loop.outputs.values())}"
              " calls)", "; ".join(loop.errors[:5]))
        check(set(loop.outputs) <= {old, new, '{"cniVersion":"1.1.0","supportedVersions":'
                                    '["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}'},
              "each call saw the old or the new binary", str(loop.outputs))
        check(loop.outputs.get(old, 0) > 0 and loop.outputs.get(new, 0) > 0,
              "calls ran before and after the replacement", str(loop.outputs))
        exe = os.readlink(f"/proc/{old_agent.pid}/exe") if old_agent.poll() is None else ""
        status, _ = http_get(node, "/healthz", port=9521)
        check(exe.endswith("(deleted)") and status == 200,
              "the binary that was executing was replaced under it and still runs", exe)
        r = subprocess.run([node.path("/opt/cni/bin/rdmanet"), "version"], capture_output=True,
                           text=True)
        check(r.stdout.strip() == new, "the node now runs the next image's binary", r.stdout)

        # DEL by N+1's binary of what N's binary added.
        rc, _, err = node.cni("DEL", pod_config(dev_a), "pod-a", ns_a)
        check(rc == 0 and node.link_in(node.netns, dev_a) and not node.link_in(ns_a, "net1"),
              "DEL by the next image's binary brings home the device image N attached", err)

        # The orphan: the agent (of either pod) tears it down after its grace period.
        deadline = orphaned_at + 150
        while time.monotonic() < deadline and (records(node) or leases(node)):
            time.sleep(2)
        waited = time.monotonic() - orphaned_at
        check(not records(node) and not leases(node),
              f"the node agent tore down the attachment whose netns went without DEL "
              f"({waited:.0f} s; --grace 60 --interval 30)",
              f"{records(node)} {leases(node)} {pod2.logs_of('node-agent')[-800:]}")
        # Either pod's agent may have done it: the new one counts it in the metrics it serves
        # now, the old one only logged it.
        status, metrics = http_get(node, "/metrics")
        counted = re.findall(r'^rdmanet_orphan_teardowns_total\{reason="netns-gone"\} ([0-9.]+)$',
                             metrics, re.M)
        dev_b, ns_b = orphan
        teardown = (f"node-agent: tearing down {dev_b} of pod team/pod-b (container pod-b, net1 in "
                    f"network rail0): its netns /run/netns/{ns_b} is gone")
        agent_logs = pod.logs.get("node-agent", "") + pod2.logs_of("node-agent")
        check(sum(float(v) for v in counted) >= 1 or teardown in agent_logs,
              "the teardown is counted in the agent's metrics or logged",
              f"no {teardown!r} in the agents' logs; metrics: {metrics[-600:]}")

        # 6. Uninstall with a pod still attached.
        ns_c = node.add_pod_netns("c")
        rc, _, err = node.cni("ADD", pod_config(dev_c), "pod-c", ns_c)
        check(rc == 0, "a pod attached before the uninstall", err)
    finally:
        pod2.stop()
    ds3 = render_with(base_dir, image_tag=imagelib.IMAGE_NEXT.split(":")[1],
                      install_env={"UNINSTALL": "true"})
    pod3 = podspec.Pod(podman, ds3["spec"]["template"], knode, f"rdmanet-{tag}-c",
                       image=imagelib.IMAGE_NEXT)
    PODS.append(pod3)
    pod3.start()
    try:
        time.sleep(8)
        kept = all(os.path.exists(node.path(f"/opt/cni/bin/{b}")) for b in ("rdmanet", "rdmanet-ipam"))
        check(kept and not pod3.states["install"].ready,
              "uninstall keeps the binaries while an attachment is left, and is not ready",
              pod3.logs_of("install")[-500:])
        check("1 attachment(s) still on this node" in pod3.logs_of("install"),
              "uninstall says why it waits")
        rc, _, err = node.cni("DEL", pod_config(dev_c), "pod-c", ns_c)
        check(rc == 0 and node.link_in(node.netns, dev_c), "the last pod's DEL", err)
        ready = pod3.wait_ready("install", 60)
        gone = not any(os.path.exists(node.path(f"/opt/cni/bin/{b}"))
                       for b in ("rdmanet", "rdmanet-ipam"))
        check(ready and gone and not os.path.exists(node.path("/var/lib/rdmanet/node-name")),
              "then uninstall removes the binaries and the node name, and is ready",
              pod3.logs_of("install")[-500:])
        check(os.path.isdir(node.path("/var/lib/cni/rdmanet")),
              "uninstall leaves the state directory")
    finally:
        pod3.stop()


if __name__ == "__main__":
    sys.exit(main())
