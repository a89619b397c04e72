#!/usr/bin/env python3
"""deploy/: every kustomization builds offline with kubectl, every document
parses, every NetworkAttachmentDefinition's config passes `rdmanet validate`
(and `rdmanet-ipam validate` for rdmanet-ipam sections), and the workloads
are wired to their scenario: NAD annotation, device-plugin resource, IPC_LOCK,
no hostNetwork. A missing kubectl or PyYAML is a failure, not a skip.
Usage: deploy_manifests_test.py DEPLOY_DIR RDMANET RDMANET_IPAM"""
import json, os, shutil, subprocess, sys, tempfile

deploy, rdmanet, rdmanet_ipam = sys.argv[1:4]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


kubectl = shutil.which("kubectl")
if not kubectl:
    sys.exit("FAIL: kubectl not found (Debian: apt-get install kubernetes-client)")
try:
    import yaml
except ImportError:
    sys.exit("FAIL: PyYAML not found (Debian: apt-get install python3-yaml)")

SCENARIOS = ["shared-roce", "sriov-roce", "ib-sriov", "soft-roce"]
# Node agents may use the host network; nothing a user runs may.
NODE_AGENTS = {"rdmanet", "rdma-shared-dp-ds", "kube-sriov-device-plugin"}


def build(rel):
    r = subprocess.run([kubectl, "kustomize", os.path.join(deploy, rel)], capture_output=True, text=True)
    check(r.returncode == 0, f"kubectl kustomize {rel} builds" + (f": {r.stderr.strip()}" if r.returncode else ""))
    try:
        docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    except yaml.YAMLError as e:
        check(False, f"{rel}: output parses as YAML: {e}")
        return []
    for d in docs:
        ok = isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name")
        check(bool(ok), f"{rel}: {d.get('kind')}/{d.get('metadata', {}).get('name')} has apiVersion, kind, name")
    return docs


def dicts(doc, match):
    """Every dict anywhere inside a document (Deployment, DaemonSet, MPIJob
    replicas...) for which match(d) holds."""
    if isinstance(doc, dict):
        if match(doc):
            yield doc
        for v in doc.values():
            yield from dicts(v, match)
    elif isinstance(doc, list):
        for v in doc:
            yield from dicts(v, match)


def pod_specs(doc):
    """Every pod spec inside a document."""
    return dicts(doc, lambda d: isinstance(d.get("containers"), list))


def templates(doc):
    """Every pod template (metadata + spec)."""
    return dicts(doc, lambda d: isinstance(d.get("spec"), dict) and "containers" in d["spec"])


def validate(tool, cfg, label):
    with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
        f.write(cfg)
        f.flush()
        r = subprocess.run([tool, "validate", f.name], capture_output=True, text=True)
    check(r.returncode == 0, f"{label}: {os.path.basename(tool)} validate: {(r.stdout + r.stderr).strip()}")


# Every file in deploy/ that is YAML parses on its own too.
for root, _, files in os.walk(deploy):
    for n in files:
        if n.endswith((".yaml", ".yml")):
            p = os.path.join(root, n)
            try:
                list(yaml.safe_load_all(open(p)))
                check(True, f"{os.path.relpath(p, deploy)} parses")
            except yaml.YAMLError as e:
                check(False, f"{os.path.relpath(p, deploy)} parses: {e}")

base = build("base")
ds = [d for d in base if d["kind"] == "DaemonSet"]
check(len(ds) == 1, "base has the rdmanet DaemonSet")
if ds:
    spec = ds[0]["spec"]["template"]["spec"]
    keys = {t.get("key") for t in spec.get("tolerations", [])}
    check("nvidia.com/gpu" in keys, "DaemonSet tolerates GPU nodes")
    for c in spec["containers"] + spec.get("initContainers", []):
        check("limits" in c.get("resources", {}), f"container {c['name']} has resource limits")
    install = spec["containers"][0]
    check("--check" in json.dumps(install.get("readinessProbe", {})), "installer has the --check readiness probe")
    agent = [c for c in spec["containers"] if c["name"] == "node-agent"]
    check(len(agent) == 1 and "node-agent" in " ".join(agent[0]["command"])
          and agent[0].get("livenessProbe", {}).get("httpGet", {}).get("path") == "/healthz"
          and any(m.get("mountPropagation") == "HostToContainer" for m in agent[0]["volumeMounts"]),
          "DaemonSet runs the node agent (healthz probe, host root with HostToContainer propagation)")
    annotations = ds[0]["spec"]["template"]["metadata"].get("annotations", {})
    check(annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") == "9520",
          "the agent's metrics port is annotated for scraping")
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    check({"/opt/cni/bin", "/var/lib/cni/rdmanet"} <= paths, f"host mounts for bin and state dirs: {sorted(paths)}")
check(any(d["kind"] == "Namespace" for d in base) and any(d["kind"] == "ServiceAccount" for d in base),
      "base has the Namespace and ServiceAccount")

for s in SCENARIOS:
    infra = build(f"overlays/{s}")
    nads = {d["metadata"]["name"]: d for d in infra if d["kind"] == "NetworkAttachmentDefinition"}
    check(len(nads) >= 1, f"{s}: has a NetworkAttachmentDefinition")
    resources = set()
    for d in infra:
        if d["kind"] == "ConfigMap" and "config.json" in d.get("data", {}):
            cm = json.loads(d["data"]["config.json"])
            for r in cm.get("configList", []):  # k8s-rdma-shared-dev-plugin
                resources.add("rdma/" + r["resourceName"])
            for r in cm.get("resourceList", []):  # sriov-network-device-plugin
                resources.add(r.get("resourcePrefix", "intel.com") + "/" + r["resourceName"])
                check(r["selectors"].get("isRdma") is True, f"{s}: SR-IOV resource {r['resourceName']} has isRdma")
        if d["kind"] == "DaemonSet":
            for t in templates(d):
                if t["spec"].get("hostNetwork"):
                    check(d["metadata"]["name"] in NODE_AGENTS, f"{s}: hostNetwork only on node agents ({d['metadata']['name']})")
        if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "rdmanet":
            init = {c["name"]: c for c in d["spec"]["template"]["spec"]["initContainers"]}
            prep = init.get("node-prep", {})
            check(bool(prep.get("volumeMounts")), f"{s}: node-prep keeps its host mounts after patches")
            wants = "--exclusive" in prep.get("command", [])
            check(wants == (s in ("sriov-roce", "ib-sriov")), f"{s}: node-prep sets exclusive mode only for SR-IOV scenarios")
    for name, nad in nads.items():
        cfg = nad["spec"]["config"]
        conf = json.loads(cfg)
        check(conf.get("name") == name, f"{s}/{name}: config name equals the NAD name")
        validate(rdmanet, cfg, f"{s}/{name}")
        ipams = [conf.get("ipam", {})] + [p.get("ipam", {}) for p in conf.get("plugins", [])]
        if any(i.get("type") == "rdmanet-ipam" for i in ipams):
            validate(rdmanet_ipam, cfg, f"{s}/{name}")
        caps = conf.get("capabilities", {})
        rn = nad["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/resourceName")
        if rn:
            check(rn in resources, f"{s}/{name}: resourceName {rn} is advertised by the overlay's device plugin")
            check(caps.get("deviceID") and caps.get("CNIDeviceInfoFile"),
                  f"{s}/{name}: declares deviceID and CNIDeviceInfoFile capabilities")
        if s == "ib-sriov":
            check(caps.get("infinibandGUID") is True, f"{s}/{name}: declares the infinibandGUID capability")

    work = build(f"workloads/{s}")
    jobs = [d for d in work if d["kind"] == "MPIJob"]
    check(len(jobs) == 1, f"{s}: workload is one MPIJob")
    check(any(d["kind"] == "ConfigMap" and d["metadata"]["name"] == "rdmanet-nccl-env" for d in work),
          f"{s}: workload ships rdma-env.sh")
    for d in work:
        for t in templates(d):
            check(not t["spec"].get("hostNetwork"), f"{s}: {d['kind']}/{d['metadata']['name']} does not use hostNetwork")
    # The DaemonSet form of the NCCL test (shared-roce): the same worker pod rules.
    for ds in [d for d in work if d["kind"] == "DaemonSet"]:
        t = ds["spec"]["template"]
        nets = json.loads(t["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
        check(all(n["name"] in nads for n in nets), f"{s}: DaemonSet attaches NADs of the overlay")
        c0 = t["spec"]["containers"][0]
        check("IPC_LOCK" in c0.get("securityContext", {}).get("capabilities", {}).get("add", []),
              f"{s}: DaemonSet worker has IPC_LOCK")
        check(all(c0["resources"]["limits"].get(r) == 1 for r in resources), f"{s}: DaemonSet worker requests the rail")
        check(any(m.get("subPathExpr") == "$(POD_UID)" and m.get("readOnly") for m in c0.get("volumeMounts", [])),
              f"{s}: DaemonSet worker mounts its rdmanet pod directory read-only")
        check("/dev/infiniband" not in json.dumps(t["spec"].get("volumes", [])), f"{s}: DaemonSet: no /dev/infiniband host mount")
    for j in jobs:
        workers = j["spec"]["mpiReplicaSpecs"]["Worker"]
        check(workers["replicas"] == 2, f"{s}: two workers")
        t = workers["template"]
        nets = json.loads(t["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
        # One rail per GPU where the overlay has several: net1..netN, rail k on net<k+1>.
        check(len(nets) == len(nads), f"{s}: worker attaches every rail of the overlay ({len(nads)})")
        for k, n in enumerate(nets):
            check(n["name"] in nads, f"{s}: worker attaches NAD {n['name']} defined by the overlay")
            check(n.get("interface") == f"net{k + 1}", f"{s}: rail {k} is named net{k + 1}")
        if len(nets) > 1:
            gpus = t["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu")
            check(gpus == len(nets), f"{s}: {len(nets)} rails for {gpus} GPUs")
        # rdma-env.sh reads what rdmanet wrote for this pod: the node's podInfoDir, this
        # pod's directory only, read-only.
        c0 = t["spec"]["containers"][0]
        pod_vol = [v for v in t["spec"].get("volumes", []) if v.get("hostPath", {}).get("path") == "/run/rdmanet/pods"]
        mounts = [m for m in c0.get("volumeMounts", []) if pod_vol and m["name"] == pod_vol[0]["name"]]
        check(len(mounts) == 1 and mounts[0].get("subPathExpr") == "$(POD_UID)" and mounts[0].get("readOnly")
              and mounts[0].get("mountPath") == "/run/rdmanet/pod",
              f"{s}: worker mounts its own rdmanet pod directory read-only at /run/rdmanet/pod")
        check(any(e.get("name") == "POD_UID" and e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.uid"
                  for e in c0.get("env", [])), f"{s}: POD_UID comes from metadata.uid")
        c = t["spec"]["containers"][0]
        check("IPC_LOCK" in c.get("securityContext", {}).get("capabilities", {}).get("add", []), f"{s}: worker has IPC_LOCK")
        limits = c["resources"]["limits"]
        for r in resources:
            check(limits.get(r) == 1, f"{s}: worker requests {r}")
        vols = json.dumps(t["spec"].get("volumes", []))
        check("/dev/infiniband" not in vols, f"{s}: no /dev/infiniband host mount")
        args = j["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
        check("/etc/rdmanet/rdma-env.sh" in args and not any(a.startswith("NCCL_SOCKET_IFNAME=") for a in args),
              f"{s}: mpirun runs ranks through rdma-env.sh, which sets NCCL_SOCKET_IFNAME from the rails")
        # The seed's launch (pml ucx), every rank pointed at its pod's files, no device by hand.
        pairs = list(zip(args, args[1:]))
        check(("pml", "ucx") in pairs, f"{s}: mpirun runs MPI over UCX (--mca pml ucx)")
        check(("-x", "UCX_CONFIG_DIR=/run/rdmanet/pod") in pairs
              and ("-x", "NCCL_CONF_FILE=/run/rdmanet/pod/nccl.conf") in pairs,
              f"{s}: mpirun passes UCX_CONFIG_DIR and NCCL_CONF_FILE to every rank")
        check(not any(k in a for a in args for k in ("UCX_NET_DEVICES", "NCCL_IB_HCA", "UCX_IB_GID_INDEX")),
              f"{s}: mpirun names no device by hand")

# The Pod Security "baseline" workload: SR-IOV rails of the sriov-roce overlay, nothing the
# baseline profile forbids (checked here field by field, as the admission controller does:
# https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline), and the
# facts through a downwardAPI file of the network-status annotation instead of hostPath.
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                 "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {None, "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def baseline_violations(spec, meta):
    """What the Pod Security baseline profile refuses in one pod template."""
    v = []
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(f):
            v.append(f)
    v += [f"hostPath volume {x['name']}" for x in spec.get("volumes", []) if "hostPath" in x]
    for s in spec.get("securityContext", {}).get("sysctls", []):
        if s["name"] not in SAFE_SYSCTLS:
            v.append(f"sysctl {s['name']}")
    contexts = [("pod", spec.get("securityContext", {}))]
    for c in spec.get("containers", []) + spec.get("initContainers", []) + spec.get("ephemeralContainers", []):
        sc = c.get("securityContext", {})
        contexts.append((c["name"], sc))
        if sc.get("privileged"):
            v.append(f"{c['name']}: privileged")
        extra = set(sc.get("capabilities", {}).get("add", [])) - BASELINE_CAPS
        if extra:
            v.append(f"{c['name']}: capabilities {sorted(extra)}")
        if sc.get("procMount", "Default") != "Default":
            v.append(f"{c['name']}: procMount {sc['procMount']}")
        if sc.get("windowsOptions", {}).get("hostProcess"):
            v.append(f"{c['name']}: hostProcess")
        v += [f"{c['name']}: hostPort {p['hostPort']}" for p in c.get("ports", []) if p.get("hostPort")]
    for who, sc in contexts:
        if sc.get("seccompProfile", {}).get("type") == "Unconfined":
            v.append(f"{who}: seccomp Unconfined")
        if sc.get("appArmorProfile", {}).get("type") == "Unconfined":
            v.append(f"{who}: AppArmor Unconfined")
        se = sc.get("seLinuxOptions", {})
        if se.get("type") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            v.append(f"{who}: seLinuxOptions {se}")
    for k, val in meta.get("annotations", {}).items():
        if k.startswith("container.apparmor.security.beta.kubernetes.io/") and val not in ("runtime/default",) \
                and not val.startswith("localhost/"):
            v.append(f"AppArmor annotation {k}: {val}")
    return v


# The checker itself: each rule catches what it is for.
for bad_spec, what in [({"hostNetwork": True, "containers": []}, "hostNetwork"),
                       ({"volumes": [{"name": "x", "hostPath": {"path": "/"}}], "containers": []}, "hostPath"),
                       ({"containers": [{"name": "c", "securityContext": {"privileged": True}}]}, "privileged"),
                       ({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}]}, "IPC_LOCK"),
                       ({"containers": [{"name": "c", "ports": [{"containerPort": 22, "hostPort": 22}]}]}, "hostPort"),
                       ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": []}, "seccomp")]:
    check(baseline_violations(bad_spec, {}) != [], f"baseline checker refuses {what}")

sriov_nads = {d["metadata"]["name"] for d in build("overlays/sriov-roce") if d["kind"] == "NetworkAttachmentDefinition"}
bl = build("workloads/baseline-roce")
bl_ns = [d for d in bl if d["kind"] == "Namespace"]
check(len(bl_ns) == 1 and bl_ns[0]["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce") == "baseline",
      "baseline-roce: its namespace enforces Pod Security baseline")
check(all(d["metadata"].get("namespace") == bl_ns[0]["metadata"]["name"] for d in bl if d["kind"] != "Namespace") if bl_ns else False,
      "baseline-roce: everything in that namespace")
bl_jobs = [d for d in bl if d["kind"] == "MPIJob"]
check(len(bl_jobs) == 1, "baseline-roce: one MPIJob")
for j in bl_jobs:
    for role in ("Launcher", "Worker"):
        t = j["spec"]["mpiReplicaSpecs"][role]["template"]
        v = baseline_violations(t["spec"], t.get("metadata", {}))
        check(not v, f"baseline-roce: {role} passes Pod Security baseline: {v or 'yes'}")
    t = j["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    nets = json.loads(t["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
    check(len(nets) == len(sriov_nads) and all(n["name"] in sriov_nads and n.get("namespace") == "default" for n in nets)
          and [n["interface"] for n in nets] == [f"net{k + 1}" for k in range(len(nets))],
          f"baseline-roce: worker attaches the sriov-roce rails (default namespace) as net1..net{len(nets)}")
    c = t["spec"]["containers"][0]
    check(all(c["resources"]["limits"].get("nvidia.com/" + n["name"].replace("-", "_")) == 1 for n in nets),
          "baseline-roce: worker requests each rail's VF resource")
    vols = {x["name"]: x for x in t["spec"].get("volumes", [])}
    dapi = [x for x in vols.values() if any(
        i.get("path") == "network-status"
        and i.get("fieldRef", {}).get("fieldPath") == "metadata.annotations['k8s.v1.cni.cncf.io/network-status']"
        for i in x.get("downwardAPI", {}).get("items", []))]
    mounts = [m for m in c.get("volumeMounts", []) if dapi and m["name"] == dapi[0]["name"]]
    status_file = next((e.get("value") for e in c.get("env", []) if e["name"] == "NETWORK_STATUS_FILE"), "/etc/podinfo/network-status")
    check(len(mounts) == 1 and mounts[0]["mountPath"] + "/network-status" == status_file,
          f"baseline-roce: the network-status annotation is a downwardAPI file at {status_file}, where rdma-env.sh reads it")
    check(not any(m.get("mountPath", "").startswith("/run/rdmanet") for m in c.get("volumeMounts", [])),
          "baseline-roce: no rdmanet pod directory mount")
    args = j["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    check("/etc/rdmanet/rdma-env.sh" in args, "baseline-roce: ranks run through rdma-env.sh")

# No workload hard-codes what rdmanet's files carry; those that mount them point NCCL and UCX
# at them.
for s in SCENARIOS:
    for d in build(f"workloads/{s}"):
        if d["kind"] == "ConfigMap":
            continue  # rdma-env.sh itself, which names them
        text = json.dumps(d)
        check("NCCL_IB_TC=" not in text and "NCCL_IB_GID_INDEX=" not in text,
              f"{s}: {d['kind']}/{d['metadata']['name']} sets no NCCL_IB_TC/NCCL_IB_GID_INDEX literal")
        for t in templates(d):
            for c in t["spec"]["containers"]:
                if any(m.get("mountPath") == "/run/rdmanet/pod" for m in c.get("volumeMounts", [])):
                    env = {e["name"]: e.get("value") for e in c.get("env", [])}
                    check(env.get("NCCL_CONF_FILE") == "/run/rdmanet/pod/nccl.conf" and env.get("UCX_CONFIG_DIR") == "/run/rdmanet/pod",
                          f"{s}: {d['metadata']['name']}/{c['name']}: NCCL_CONF_FILE and UCX_CONFIG_DIR name the pod files")

# The monitoring example: it parses, and every metric its alerts use is one the agent
# exports (names read from agent/metrics.cc, whose table declares each family once).
import re
with open(os.path.join(deploy, "..", "agent", "metrics.cc")) as f:
    exported = set(re.findall(r'\{"(rdmanet_[a-z_]+)", "(?:gauge|counter)"', f.read()))
with open(os.path.join(deploy, "monitoring", "podmonitor.yaml")) as f:
    mon = [d for d in yaml.safe_load_all(f) if d]
kinds = {d["kind"] for d in mon}
check(kinds == {"PodMonitor", "PrometheusRule"}, f"monitoring example has a PodMonitor and alert rules: {kinds}")
for d in mon:
    for group in d.get("spec", {}).get("groups", []):
        for rule in group["rules"]:
            used = set(re.findall(r"rdmanet_[a-z_]+", rule["expr"]))
            check(used and used <= exported, f"alert {rule['alert']} uses exported metrics: {sorted(used - exported) or 'yes'}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
