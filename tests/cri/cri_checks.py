"""The CRI tier's scenarios, in kubelet's order; each ends by checking the node."""

import os
import signal
import subprocess
import threading
import time

from crinode import run


def ip_of(node, sid):
    status, _ = node.status(sid)
    return status.network.ip


def ready(node, sid):
    status, _ = node.status(sid)
    return status.state == node.pb.SANDBOX_READY


def pod_has(node, sid, dev):
    """The pod's eth0 is the device (same MAC) and carries the MTU."""
    links = node.pod_links(sid)
    mac = node.devices[dev][1]
    return any(" eth0" in line and mac in line for line in links.splitlines()), links


def run_all(node, check):
    dev_a = node.add_device(0)
    dev_b = node.add_device(1)
    node.use_network(node.conflist(dev_a))

    # --- a pod, its container, its end ---------------------------------------------------
    sid, err = node.run_pod("trainer-0")
    check("run-pod-ready", sid is not None and ready(node, sid),
          "RunPodSandbox %s" % (sid[:12] if sid else "failed: %s" % err))
    if sid is None:
        return
    ip = ip_of(node, sid)
    has, links = pod_has(node, sid, dev_a)
    check("device-is-the-cri-interface", has and ip.startswith(node_subnet(node)),
          "eth0 has %s's MAC; PodSandboxStatus ip %s" % (dev_a, ip))
    code, out = node.exec_in_container(sid, "trainer-0", [
        "sh", "-c", "ip -o -4 addr show eth0; cat /sys/class/net/eth0/address "
        "/sys/class/net/eth0/mtu; ping -c1 -W2 %s >/dev/null && echo reached" % node_peer()])
    check("container-sees-it", code == 0 and ip + "/24" in out and node.devices[dev_a][1] in out
          and "1450" in out and "reached" in out,
          "a container in the pod: %s" % " | ".join(out.split("\n")))
    clean, held = node.clean(live=1)
    check("one-pod-holds-one-of-each", clean, "record, lease, cache entry, pin, pod dir: %s" %
          (held or "1 each"))
    node.stop_pod(sid)
    home, now = node.home(dev_a)
    check("stop-returns-the-device", home and not node.leases(),
          "after StopPodSandbox %s is home %s, leases %s" % (dev_a, now, node.leases()))
    node.remove_pod(sid)
    clean, held = node.clean()
    calls = node.calls_for(sid)
    check("remove-leaves-nothing", clean and node.home(dev_a)[0]
          and calls == ["ADD", "DEL", "DEL (no netns)"],
          "after RemovePodSandbox: %s; calls %s" % (held or "nothing held", calls))


    two_pods_two_devices(node, check, dev_a, dev_b)
    racing_sandboxes(node, check, node.add_device(2))
    missing_device(node, check)
    containerd_restarted(node, check, node.add_device(3), signal.SIGTERM)
    containerd_restarted(node, check, node.add_device(10), signal.SIGKILL)
    containerd_killed_mid_add(node, check, node.add_device(4))
    sandbox_process_killed(node, check, node.add_device(5))
    netns_pin_removed(node, check, node.add_device(6))
    cancelled_mid_add(node, check, node.add_device(7))
    result_version_1_1_0(node, check, node.add_device(8))
    versions_list(node, check, node.add_device(9))
    pod_disguises_its_device(node, check, node.add_device(11))


def two_pods_two_devices(node, check, dev_a, dev_b):
    # Without Multus the pod network is one config: the second pod's device comes from the
    # config as rewritten in between (containerd reloads it). The first pod's DEL then
    # runs with the new config, naming the other device: rdmanet undoes what it recorded.
    node.use_network(node.conflist(dev_a))
    p1, e1 = node.run_pod("pair-1")
    node.use_network(node.conflist(dev_b))
    p2, e2 = node.run_pod("pair-2")
    if not p1 or not p2:
        check("two-pods-two-devices", False, "RunPodSandbox: %s / %s" % (e1, e2))
        return
    ips = (ip_of(node, p1), ip_of(node, p2))
    check("two-pods-two-devices", pod_has(node, p1, dev_a)[0] and pod_has(node, p2, dev_b)[0]
          and ips[0] != ips[1] and len(node.leases()) == 2,
          "pair-1 has %s (%s), pair-2 has %s (%s)" % (dev_a, ips[0], dev_b, ips[1]))
    node.stop_and_remove(p1)
    check("del-under-a-changed-config-undoes-the-record",
          node.home(dev_a)[0] and pod_has(node, p2, dev_b)[0] and node.leases() == [ips[1]],
          "pair-1 removed while the config names %s: %s home, pair-2 keeps %s and %s" %
          (dev_b, dev_a, dev_b, ips[1]))
    node.stop_and_remove(p2)
    clean, held = node.clean()
    check("two-pods-nothing-left", clean and node.home(dev_b)[0], held or "nothing held")


def racing_sandboxes(node, check, dev):
    node.use_network(node.conflist(dev))
    out = {}

    def start(name):
        out[name] = node.run_pod(name)

    threads = [threading.Thread(target=start, args=(n,)) for n in ("racer-1", "racer-2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [n for n, (sid, _) in out.items() if sid]
    lost = [n for n, (sid, _) in out.items() if not sid]
    msg = out[lost[0]][1] if len(lost) == 1 else ""
    check("racing-sandboxes-one-wins", len(won) == 1 and "is held by pod team-cri/" + won[0] in msg
          and dev in msg, "%s won; %s got: %s" % (won, lost, msg))
    clean, held = node.clean(live=1)
    check("racing-loser-leaves-nothing", clean, held or "one record, lease, pin: the winner's")
    for n in won:
        node.stop_and_remove(out[n][0])
    clean, held = node.clean()
    check("racing-nothing-left", clean and node.home(dev)[0], held or "nothing held")


def missing_device(node, check):
    missing = "cr%s99" % node.tag
    node.use_network(node.conflist(missing))
    sid, err = node.run_pod("lonely")
    clean, held = node.clean()
    check("missing-device-error-reaches-the-caller",
          sid is None and 'plugin type="rdmanet"' in (err or "") and missing in (err or "")
          and clean, "RunPodSandbox: %s; %s" % (err, held or "nothing held"))


def containerd_restarted(node, check, dev, sig):
    node.use_network(node.conflist(dev))
    sid, err = node.run_pod("survivor-%d" % sig)
    if not sid:
        check("containerd-restart-%s" % sig.name, False, err)
        return
    node.restart(sig)
    ok = ready(node, sid) and pod_has(node, sid, dev)[0]
    node.stop_and_remove(sid)
    clean, held = node.clean()
    check("containerd-%s-with-pods-running" % sig.name, ok and clean and node.home(dev)[0],
          "pod READY with %s after the restart; Stop/Remove: %s" % (dev, held or "nothing held"))


def containerd_killed_mid_add(node, check, dev):
    # ADD is in its IPAM call (slow-ipam sleeps 3 s) when containerd is SIGKILLed: the plugin
    # finishes for nobody. What containerd knows and what kubelet does next is measured.
    node.use_network(node.conflist(dev, ipam="slow-ipam"))
    out = {}
    ipam_adds = len(node.calls_of("slow-ipam", "ADD"))
    t = threading.Thread(target=lambda: out.update(r=node.run_pod("orphan", timeout=30)))
    t.start()
    deadline = time.monotonic() + 30
    while len(node.calls_of("slow-ipam", "ADD")) == ipam_adds and time.monotonic() < deadline:
        time.sleep(0.05)
    in_ipam = len(node.calls_of("slow-ipam", "ADD")) > ipam_adds
    node.cd.stop(signal.SIGKILL)
    t.join()
    cid = node.last_container("ADD")
    # The plugin's ADD ends on its own.
    running = node.wait_calls_ended(cid) + node.wait_calls_ended(cid, plugin="slow-ipam")
    check("containerd-killed-while-add-in-ipam", in_ipam and not running,
          "the IPAM ADD %s when containerd was killed; still running after 30 s: %s" %
          ("ran" if in_ipam else "had not started", running or "none"))
    node.start()
    sandboxes = node.rt.ListPodSandbox(node.pb.ListPodSandboxRequest()).items
    states = [node.pb.PodSandboxState.Name(s.state) for s in sandboxes]
    check("containerd-killed-mid-add-knows-the-sandbox", len(sandboxes) == 1,
          "after the restart containerd lists %s; records %d, leases %s, pins %d" %
          (states, len(node.records()), node.leases(), len(node.pins())))
    if len(sandboxes) != 1:
        return
    old = sandboxes[0].id
    # kubelet: the sandbox is not ready, so stop it, start attempt 1, remove the old later.
    node.stop_pod(old)
    home, now = node.home(dev)
    check("stop-after-containerd-killed-mid-add", home and not node.leases(),
          "StopPodSandbox: %s home %s; leases %s; calls %s" %
          (dev, now, node.leases(), node.calls_for(old)))
    node.use_network(node.conflist(dev))
    sid, err = node.run_pod("orphan", attempt=1)
    node.remove_pod(old)
    check("attempt-1-after-containerd-killed-mid-add",
          sid is not None and pod_has(node, sid, dev)[0] and len(node.leases()) == 1,
          "attempt 1: %s with %s after the old sandbox's Remove" %
          (sid[:12] if sid else err, dev))
    if sid:
        node.stop_and_remove(sid)
    clean, held = node.clean()
    check("containerd-killed-mid-add-nothing-left", clean and node.home(dev)[0],
          held or "nothing held")


def sandbox_process_killed(node, check, dev):
    node.use_network(node.conflist(dev))
    old, err = node.run_pod("phoenix")
    if not old:
        check("sandbox-killed", False, err)
        return
    _, info = node.status(old)
    os.kill(info["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while ready(node, old) and time.monotonic() < deadline:
        time.sleep(0.05)
    check("sandbox-killed-not-ready", not ready(node, old), "PodSandboxStatus after SIGKILL")
    # kubelet's order: stop the dead sandbox, start attempt 1, remove the old one later.
    node.stop_pod(old)
    home, now = node.home(dev)
    check("stop-of-dead-sandbox-returns-the-device", home and not node.leases(),
          "%s home %s; leases %s" % (dev, now, node.leases()))
    new, err = node.run_pod("phoenix", attempt=1)
    node.remove_pod(old)
    ok = new is not None and pod_has(node, new, dev)[0] and len(node.leases()) == 1
    check("remove-of-old-sandbox-leaves-attempt-1", ok,
          "attempt 1 %s keeps %s after the old one's Remove (calls for the old: %s)" %
          (new[:12] if new else err, dev, node.calls_for(old)))
    if new:
        node.stop_and_remove(new)
    clean, held = node.clean()
    check("sandbox-killed-nothing-left", clean and node.home(dev)[0], held or "nothing held")


def netns_pin_removed(node, check, dev):
    node.use_network(node.conflist(dev))
    sid, err = node.run_pod("unpinned")
    if not sid:
        check("netns-pin-removed", False, err)
        return
    pins = node.pins()
    pin = os.path.join(node.work, "state", "io.containerd.grpc.v1.cri", "netns", pins[0])
    run("umount", pin)
    os.unlink(pin)
    node.stop_pod(sid)
    # Stop killed the sandbox, and with its last reference the netns: a veth dies with it
    # (a physical NIC or VF would come back as dev<N>, see the PCI lab tier), and
    # containerd, finding no netns, calls DEL without one.
    after_stop = node.link(dev)
    node.remove_pod(sid)
    clean, held = node.clean()
    check("netns-pin-removed-cleaned", clean and after_stop is None,
          "%s; %s after Stop: %s (died with the netns); calls %s" %
          (held or "nothing held", dev, after_stop, node.calls_for(sid)))


def cancelled_mid_add(node, check, dev):
    # kubelet cancels RunPodSandbox (the pod was deleted while starting): libcni SIGKILLs
    # rdmanet while its IPAM child sleeps, then runs DEL. Nothing may come back later.
    node.use_network(node.conflist(dev, ipam="slow-ipam"))
    sid, err = node.run_pod("impatient", timeout=1.5)
    cid = node.last_container("ADD")
    # Then containerd's DEL; whatever a surviving IPAM child does (allocate after its
    # pause), it does before it ends: the node is judged once every process of the
    # sandbox's calls has ended.
    node.wait_for_call(cid, "DEL")
    running = node.wait_calls_ended(cid) + node.wait_calls_ended(cid, plugin="slow-ipam")
    clean, held = node.clean()
    # containerd removes its netns pin after the DEL returns, on its own time (seen late once
    # under the sanitizers): only the pin is waited for, up to 10 s; what rdmanet holds is not.
    for _ in range(100):
        if clean or set(held) != {"pins"}:
            break
        time.sleep(0.1)
        clean, held = node.clean()
    calls, ipam_calls = node.calls_for(cid), node.calls_for(cid, plugin="slow-ipam")
    check("cancelled-mid-add-leaves-nothing",
          sid is None and ipam_calls[:1] == ["ADD"] and calls == ["ADD", "DEL"] and clean
          and node.home(dev)[0] and not running,
          "RunPodSandbox: %s, while the IPAM ADD ran; rdmanet calls %s; %s; still running "
          "after 30 s: %s" % (err, calls, held or "nothing held", running or "none"))


def result_version_1_1_0(node, check, dev):
    node.use_network(node.conflist(dev, version="1.1.0"))
    sid, err = node.run_pod("too-new")
    clean, held = node.clean()
    check("cni-1.1.0-refused-by-containerd-1.6-cleanly",
          sid is None and 'unsupported CNI result version "1.1.0"' in (err or "") and clean
          and node.home(dev)[0], "RunPodSandbox: %s; %s" % (err, held or "nothing held"))


def versions_list(node, check, dev):
    # The conflist the docs recommend for every runtime: libcni >= 1.2 (containerd 2.x,
    # CRI-O >= 1.31) picks 1.1.0 from cniVersions; containerd 1.6's libcni ignores the list
    # and uses cniVersion.
    conf = node.conflist(dev)
    conf["cniVersions"] = ["1.0.0", "1.1.0"]
    node.use_network(conf)
    sid, err = node.run_pod("negotiator")
    cached = node.cached_result(sid) if sid else {}
    version = cached.get("result", {}).get("cniVersion")
    check("cni-versions-list-works-on-containerd-1.6",
          sid is not None and pod_has(node, sid, dev)[0] and version == "1.0.0",
          "RunPodSandbox %s; libcni cached a %s result" % (sid[:12] if sid else err, version))
    if sid:
        node.stop_and_remove(sid)
    clean, held = node.clean()
    check("cni-versions-list-nothing-left", clean and node.home(dev)[0], held or "nothing held")


def pod_disguises_its_device(node, check, dev):
    # A pod with CAP_NET_ADMIN in its netns renames the device, gives it another MAC and
    # puts a decoy under the name rdmanet gave it. DEL must still find the device (by the
    # veth's peer on the bridge, which the pod cannot touch), bring it home as it was, and
    # release the address only then.
    node.use_network(node.conflist(dev))
    sid, err = node.run_pod("disguiser")
    if not sid:
        check("pod-disguises-its-device", False, err)
        return
    _, info = node.status(sid)
    pod = ["nsenter", "-t", str(info["pid"]), "-n", "ip"]
    for argv in (["link", "set", "eth0", "down"], ["link", "set", "eth0", "name", "hidden0"],
                 ["link", "set", "hidden0", "address", "02:00:00:00:be:ef"],
                 ["link", "add", "eth0", "type", "veth", "peer", "name", "decoy0"],
                 ["link", "set", "hidden0", "up"]):
        run(*(pod + argv))
    disguised = node.pod_links(sid)
    node.stop_pod(sid)
    home, now = node.home(dev)
    check("disguised-device-comes-home", home and not node.leases() and "hidden0" in disguised,
          "pod renamed eth0 to hidden0 with MAC 02:00:00:00:be:ef and made a decoy eth0; "
          "after StopPodSandbox %s is %s (want %s), leases %s" %
          (dev, now, node.devices[dev], node.leases()))
    node.remove_pod(sid)
    clean, held = node.clean()
    check("disguised-nothing-left", clean and node.home(dev)[0] and
          node.calls_for(sid) == ["ADD", "DEL", "DEL (no netns)"],
          "%s; calls %s" % (held or "nothing held", node.calls_for(sid)))


def node_subnet(node):
    return "10.77.0."


def node_peer():
    return "10.77.0.254"
