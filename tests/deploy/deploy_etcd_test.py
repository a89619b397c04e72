#!/usr/bin/python3
"""deploy/etcd, run for real: the StatefulSet's etcd command line and the cert-manager
Certificates, as kustomize builds them, started as three etcd members on 127.0.0.1
(Debian's etcd-server) with certificates made by openssl from each Certificate's own
names and usages; then rdmanet-ipam claims a block through them with the client
certificate the DaemonSet installs, and the node agent's heartbeat (an etcd lease) lands.

What differs from a cluster, and why: the members' DNS names become 127.0.0.1 with a port
each (no cluster DNS here), so the peer certificate also gets 127.0.0.1; Debian 12's etcd
is 3.4 (the manifest's image is 3.5), so readiness is asked at /health, not /readyz.

Then the node agent against it (`rdmanet node-agent`, two cluster-mode networks): one
heartbeat per round for both (etcd's own LeaseGrant count), its node's block held, and
the block of a node that never heartbeats reported as silent and left in etcd.

Usage: deploy_etcd_test.py DEPLOY_DIR RDMANET_IPAM RDMANET
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

deploy, ipam, rdmanet = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    out = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return out


for tool in ("kubectl", "etcd", "openssl"):
    if not shutil.which(tool):
        sys.exit(f"FAIL: {tool} missing (tests/tools/deps.sh installs it)")
built = subprocess.run(["kubectl", "kustomize", os.path.join(deploy, "etcd")], capture_output=True,
                       text=True)
check(built.returncode == 0, "deploy/etcd builds: " + built.stderr.strip()[-200:])
docs = [d for d in yaml.safe_load_all(built.stdout) if d]
sts = next(d for d in docs if d["kind"] == "StatefulSet")
certs = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Certificate"}
services = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Service"}
replicas = sts["spec"]["replicas"]
command = sts["spec"]["template"]["spec"]["containers"][0]["command"]

# The manifest is consistent with itself and with the DaemonSet.
initial = next(a for a in command if a.startswith("--initial-cluster="))
members = [m.split("=")[0] for m in initial.split("=", 1)[1].split(",")]
check(members == [f"rdmanet-etcd-{i}" for i in range(replicas)],
      f"--initial-cluster names the {replicas} members: {members}")
vips = [services[f"rdmanet-etcd-{i}"]["clusterIP"] for i in range(replicas)]
check(set(vips) <= set(certs["rdmanet-etcd-server"]["ipAddresses"]),
      f"the server certificate covers each member's ClusterIP {vips}")
check(certs["rdmanet-etcd-client"]["secretName"] == "rdmanet-etcd-tls",
      "the client certificate's Secret is the one the DaemonSet installs (rdmanet-etcd-tls)")
for m in members:
    host = f"{m}.rdmanet-etcd.rdmanet-system.svc"
    check(host in certs["rdmanet-etcd-peer"]["dnsNames"] and host in
          certs["rdmanet-etcd-server"]["dnsNames"], f"peer and server certificates name {host}")

work = tempfile.mkdtemp(prefix="rdmanet-etcd-deploy.")
procs = []
try:
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=work, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=rdmanet-etcd-ca")
    usage_names = {"server auth": "serverAuth", "client auth": "clientAuth"}

    def issue(name, spec, extra_ips=()):
        sans = [f"DNS:{d}" for d in spec.get("dnsNames", [])]
        sans += [f"IP:{ip}" for ip in list(spec.get("ipAddresses", [])) + list(extra_ips)]
        ext = ["extendedKeyUsage=" + ",".join(usage_names[u] for u in spec["usages"])]
        if sans:
            ext.append("subjectAltName=" + ",".join(sans))
        with open(os.path.join(work, name + ".ext"), "w") as f:
            f.write("\n".join(ext) + "\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", name + ".key", "-out", name + ".csr",
                "-subj", "/CN=" + spec.get("commonName", name))
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "1", "-out", name + ".crt", "-extfile", name + ".ext")

    issue("server", certs["rdmanet-etcd-server"])
    issue("peer", certs["rdmanet-etcd-peer"], extra_ips=["127.0.0.1"])  # see the docstring
    issue("client", certs["rdmanet-etcd-client"])

    p = ports(3 * replicas)
    client, peer, metrics = p[:replicas], p[replicas:2 * replicas], p[2 * replicas:]

    def local(arg, i):
        for j, m in enumerate(members):
            host = f"{m}.rdmanet-etcd.rdmanet-system.svc"
            arg = arg.replace(f"https://{host}:2380", f"https://127.0.0.1:{peer[j]}")
        arg = arg.replace("$(POD_NAME).rdmanet-etcd.rdmanet-system.svc:2380", f"127.0.0.1:{peer[i]}")
        arg = arg.replace("$(POD_NAME).rdmanet-etcd.rdmanet-system.svc:2379", f"127.0.0.1:{client[i]}")
        arg = arg.replace("$(POD_NAME)", members[i])
        arg = arg.replace("0.0.0.0:2380", f"127.0.0.1:{peer[i]}")
        arg = arg.replace("0.0.0.0:2379", f"127.0.0.1:{client[i]}")
        arg = arg.replace("0.0.0.0:2381", f"127.0.0.1:{metrics[i]}")
        arg = arg.replace("/var/lib/etcd", os.path.join(work, f"data{i}"))
        arg = re.sub(r"/etc/etcd/(server|peer)/tls\.(crt|key)",
                     lambda m: os.path.join(work, f"{m.group(1)}.{m.group(2)}"), arg)
        return re.sub(r"/etc/etcd/(server|peer)/ca\.crt", os.path.join(work, "ca.crt"), arg)

    for i in range(replicas):
        argv = [local(a, i) for a in command]
        log = open(os.path.join(work, f"m{i}.log"), "w")
        procs.append(subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True))
    healthy = False
    deadline = time.time() + 30
    while time.time() < deadline and not healthy:
        try:
            healthy = all(json.loads(urllib.request.urlopen(
                f"http://127.0.0.1:{m}/health", timeout=2).read()).get("health") == "true"
                for m in metrics)
        except OSError:
            time.sleep(0.3)
    logs = "".join(open(os.path.join(work, f"m{i}.log")).read()[-600:] for i in range(replicas))
    check(healthy, "the three members form a cluster with the manifest's flags" +
          ("" if healthy else ":\n" + logs))

    # rdmanet-ipam through them, with the client certificate, as a node would.
    with open(os.path.join(work, "node-name"), "w") as f:
        f.write("node-a\n")
    conf = json.dumps({"cniVersion": "1.0.0", "name": "rail0", "type": "rdmanet", "ipam": {
        "type": "rdmanet-ipam", "dataDir": os.path.join(work, "ipam"),
        "ranges": [[{"subnet": "10.48.0.0/24"}]],
        "cluster": {"blockSize": 28, "nodeNameFile": os.path.join(work, "node-name"),
                    "etcd": {"endpoints": [f"https://127.0.0.1:{c}" for c in client],
                             "tls": {"ca": os.path.join(work, "ca.crt"),
                                     "cert": os.path.join(work, "client.crt"),
                                     "key": os.path.join(work, "client.key")}}}}})
    env = dict(os.environ, CNI_COMMAND="ADD", CNI_CONTAINERID="c0", CNI_IFNAME="net1",
               CNI_NETNS="/proc/self/ns/net", CNI_PATH="/nonexistent")
    r = subprocess.run([ipam], input=conf, env=env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "10.48.0." in r.stdout,
          "rdmanet-ipam claims a block through them with the client certificate: " +
          (r.stdout.strip() or r.stderr.strip()[-300:]))
    r = subprocess.run([ipam, "reconcile", "--heartbeat-ttl", "30", "--list-silent", "-"], input=conf,
                       capture_output=True, text=True, timeout=60)
    out = json.loads(r.stdout) if r.returncode == 0 else {}
    check(out.get("silentNodes") == {} and out["pools"][0]["blocks"] == 1,
          "the node agent's heartbeat (an etcd lease) lands: " + (r.stdout.strip() or r.stderr))

    # The node agent with two cluster-mode networks (two rails) on this etcd, and a block
    # of node-z, which has no agent.
    tls = ["--cacert", os.path.join(work, "ca.crt"), "--cert", os.path.join(work, "client.crt"),
           "--key", os.path.join(work, "client.key"),
           "--endpoints", ",".join(f"https://127.0.0.1:{c}" for c in client)]
    subprocess.run(["etcdctl", *tls, "put", "/rdmanet/ipam/rail0/blocks/10.48.0.224_28",
                    '{"node": "node-z", "claimedAt": "2026-12-04T00:00:00Z"}'],
                   env=dict(os.environ, ETCDCTL_API="3"), check=True, capture_output=True)
    nets = os.path.join(work, "networks")
    os.makedirs(nets, mode=0o700)
    doc = json.loads(conf)
    with open(os.path.join(nets, "rail0.conf"), "w") as f:
        json.dump(doc, f)
    doc["name"] = "rail1"
    doc["ipam"]["ranges"] = [[{"subnet": "10.49.0.0/24"}]]
    with open(os.path.join(nets, "rail1.conf"), "w") as f:
        json.dump(doc, f)
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    os.symlink(ipam, os.path.join(bindir, "rdmanet-ipam"))
    state = os.path.join(work, "state")
    os.makedirs(state, mode=0o700)
    port = ports(1)[0]

    def lease_grants():
        total = 0
        for m in metrics:
            text = urllib.request.urlopen(f"http://127.0.0.1:{m}/metrics", timeout=5).read().decode()
            total += sum(float(x) for x in re.findall(
                r'^grpc_server_handled_total\{[^}]*grpc_method="LeaseGrant"[^}]*\} (\S+)$', text, re.M))
        return total

    def scrape():
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    grants_before = lease_grants()
    agent = subprocess.Popen([rdmanet, "node-agent", "--state-dir", state, "--networks-dir", nets,
                              "--cni-path", bindir, "--interval", "1", "--listen",
                              f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(work, "agent.log"), "w"))
    procs.append(agent)
    deadline = time.time() + 20
    m = {}
    while time.time() < deadline and m.get("rdmanet_reconcile_rounds_total", 0) < 4:
        time.sleep(0.2)
        m = scrape()
    rounds = m.get("rdmanet_reconcile_rounds_total", 0)
    agent.terminate()
    agent.wait(10)
    grants = lease_grants() - grants_before
    silent = m.get('rdmanet_ipam_silent_node_blocks{network="rail0",node="node-z"}')
    check(rounds >= 4 and silent == 1
          and not any("node-a" in k for k in m if k.startswith("rdmanet_ipam_silent_node_blocks")),
          f"the agent reports node-z's block as silent, not its own node's (after {rounds:.0f} rounds:"
          f" {silent})")
    check(rounds >= 4 and rounds <= grants <= rounds + 1,
          f"one heartbeat per round for both networks: {grants:.0f} lease grants in {rounds:.0f} rounds")
    z = subprocess.run(["etcdctl", *tls, "get", "/rdmanet/ipam/rail0/blocks/10.48.0.224_28",
                        "--print-value-only"], env=dict(os.environ, ETCDCTL_API="3"),
                       capture_output=True, text=True)
    check("node-z" in z.stdout, "node-z's block stays node-z's (only reclaim-node takes it)")
    check(m.get('rdmanet_ipam_blocks_held{network="rail0",range_set="ipam.ranges[0]"}') == 1,
          "the agent counts its node's block on rail0")
finally:
    for proc in procs:
        proc.kill()
        proc.wait()
    shutil.rmtree(work, ignore_errors=True)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
