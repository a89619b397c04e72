"""A DaemonSet's pod template, run under podman the way a kubelet runs it on one node.

Every field of the template is either applied (image, command, args, env with
`fieldRef`, volume mounts with their propagation, hostPath/secret volumes, the
securityContext, CPU and memory limits, hostNetwork/hostPID, readiness and liveness
probes with their timing), or named here as one that only the scheduler or the API server
reads (tolerations, priorityClassName, ...). Any other field is refused with its path, so
a field added to the manifest cannot be silently ignored by the test that runs it.

The node is a network namespace (the node's host network: hostNetwork containers join
it, probes are sent from it) and a root directory (hostPath volumes are paths under it);
the node root carries the real host's /usr, /proc, /dev and netns pins, so a container
that chroots into the host root (the node agent) runs there for real.
"""
import json
import os
import subprocess
import threading
import time
import urllib.request

# Fields only the scheduler, the controllers or the API server read: nothing to apply on
# a node that is already chosen.
SCHEDULING_ONLY = {"tolerations", "priorityClassName", "nodeSelector", "affinity",
                   "serviceAccountName"}
POD_FIELDS = SCHEDULING_ONLY | {"hostNetwork", "hostPID", "initContainers", "containers",
                                "volumes", "automountServiceAccountToken",
                                "terminationGracePeriodSeconds"}
CONTAINER_FIELDS = {"name", "image", "imagePullPolicy", "command", "args", "env",
                    "volumeMounts", "securityContext", "resources", "readinessProbe",
                    "livenessProbe", "ports", "workingDir"}
SECURITY_FIELDS = {"readOnlyRootFilesystem", "allowPrivilegeEscalation", "capabilities",
                   "privileged"}
PROBE_FIELDS = {"exec", "httpGet", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
                "failureThreshold", "successThreshold"}
MOUNT_FIELDS = {"name", "mountPath", "readOnly", "mountPropagation"}
# The downward API fields a kubelet resolves for env.
FIELD_REFS = {"spec.nodeName", "metadata.name", "metadata.namespace", "metadata.uid",
              "status.hostIP", "status.podIP"}


class Refused(Exception):
    """A field of the template that this runner does not apply."""


def _only(obj, allowed, where):
    extra = sorted(set(obj) - set(allowed))
    if extra:
        raise Refused(f"{where}: field(s) {extra} not applied by tests/image/podspec.py")


def _cpus(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def _bytes(q):
    q = str(q)
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 1000, "M": 10**6, "G": 10**9}
    for u, m in units.items():
        if q.endswith(u):
            return int(float(q[:-len(u)]) * m)
    return int(q)


class Node:
    """One node: its network namespace, its IP there, its root directory, and values the
    downward API gives (node name)."""

    def __init__(self, name, netns, ip, root, secrets=None):
        self.name, self.netns, self.ip, self.root = name, netns, ip, root
        self.secrets = secrets or {}  # secretName -> {file: bytes}; absent: not in the cluster

    def host_path(self, path):
        return os.path.join(self.root, path.lstrip("/"))


class ProbeState:
    def __init__(self):
        self.ready = False
        self.results = []  # (time, ok, seconds, detail)
        self.restarts = 0


class Pod:
    """The pod template of a DaemonSet, bound to a node. start() runs the init containers to
    completion, in order, then starts the containers and their probes; stop() is the
    kubelet's termination (SIGTERM, then SIGKILL after the grace period)."""

    def __init__(self, podman, template, node, name, namespace="rdmanet-system", image=None):
        self.podman, self.node, self.name, self.namespace = podman, node, name, namespace
        self.meta = template.get("metadata", {})
        self.spec = template["spec"]
        self.expected_image = image
        self.uid = f"{name}-uid"
        self.states = {}
        self.logs = {}
        self._stop = threading.Event()
        self._threads = []
        self._validate()

    # --- checking the template ----------------------------------------------------------
    def _validate(self):
        s = self.spec
        _only(s, POD_FIELDS, "spec")
        if s.get("automountServiceAccountToken", True):
            raise Refused("spec.automountServiceAccountToken: a token mount is not applied")
        if not s.get("hostNetwork"):
            raise Refused("spec.hostNetwork: only host-network pods are run here")
        names = set()
        for v in s.get("volumes", []):
            _only(v, {"name", "hostPath", "secret"}, f"volume {v.get('name')}")
            if "hostPath" in v:
                _only(v["hostPath"], {"path", "type"}, f"volume {v['name']}.hostPath")
                if v["hostPath"].get("type", "") not in ("", "Directory", "DirectoryOrCreate"):
                    raise Refused(f"volume {v['name']}: hostPath type {v['hostPath']['type']}")
            elif "secret" in v:
                _only(v["secret"], {"secretName", "optional", "defaultMode"},
                      f"volume {v['name']}.secret")
            else:
                raise Refused(f"volume {v['name']}: only hostPath and secret volumes are applied")
            names.add(v["name"])
        for c in s.get("initContainers", []) + s["containers"]:
            where = f"container {c['name']}"
            _only(c, CONTAINER_FIELDS, where)
            if self.expected_image and c["image"] != self.expected_image:
                raise Refused(f"{where}: image {c['image']}, expected {self.expected_image}")
            _only(c.get("securityContext", {}), SECURITY_FIELDS, where + ".securityContext")
            _only(c.get("securityContext", {}).get("capabilities", {}), {"add", "drop"},
                  where + ".securityContext.capabilities")
            _only(c.get("resources", {}), {"requests", "limits"}, where + ".resources")
            for kind in ("requests", "limits"):
                _only(c.get("resources", {}).get(kind, {}), {"cpu", "memory"},
                      f"{where}.resources.{kind}")
            for e in c.get("env", []):
                _only(e, {"name", "value", "valueFrom"}, f"{where}.env {e['name']}")
                if "valueFrom" in e:
                    _only(e["valueFrom"], {"fieldRef"}, f"{where}.env {e['name']}.valueFrom")
                    if e["valueFrom"]["fieldRef"].get("fieldPath") not in FIELD_REFS:
                        raise Refused(f"{where}.env {e['name']}: fieldRef "
                                      f"{e['valueFrom']['fieldRef']}")
            for m in c.get("volumeMounts", []):
                _only(m, MOUNT_FIELDS, f"{where}.volumeMounts {m.get('name')}")
                if m["name"] not in names:
                    raise Refused(f"{where}: mount of undeclared volume {m['name']}")
                if m.get("mountPropagation", "None") not in ("None", "HostToContainer"):
                    raise Refused(f"{where}: mountPropagation {m['mountPropagation']}")
            for p in c.get("ports", []):
                _only(p, {"name", "containerPort", "protocol"}, f"{where}.ports")
            for kind in ("readinessProbe", "livenessProbe"):
                if kind in c:
                    self._check_probe(c[kind], f"{where}.{kind}", c)

    @staticmethod
    def _check_probe(probe, where, container):
        _only(probe, PROBE_FIELDS, where)
        if ("exec" in probe) == ("httpGet" in probe):
            raise Refused(f"{where}: exactly one of exec or httpGet is applied")
        if "httpGet" in probe:
            _only(probe["httpGet"], {"path", "port", "scheme"}, where + ".httpGet")
            port = probe["httpGet"]["port"]
            if isinstance(port, str) and port not in [p.get("name") for p in
                                                      container.get("ports", [])]:
                raise Refused(f"{where}: named port {port} not declared")

    # --- running ----------------------------------------------------------------------
    def _env(self, c):
        values = {"spec.nodeName": self.node.name, "metadata.name": self.name,
                  "metadata.namespace": self.namespace, "metadata.uid": self.uid,
                  "status.hostIP": self.node.ip, "status.podIP": self.node.ip}
        out = []
        for e in c.get("env", []):
            if "valueFrom" in e:
                v = values[e["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                v = e.get("value", "")
            out += ["--env", f"{e['name']}={v}"]
        return out

    def _volume_dir(self, v):
        if "hostPath" in v:
            path = self.node.host_path(v["hostPath"]["path"])
            kind = v["hostPath"].get("type", "")
            if kind == "DirectoryOrCreate":
                os.makedirs(path, mode=0o755, exist_ok=True)
            elif kind == "Directory" and not os.path.isdir(path):
                raise RuntimeError(f"hostPath {v['hostPath']['path']} is not a directory")
            return path, False
        # A secret volume: its files, read-only, each with defaultMode (0644 by default);
        # an optional secret that does not exist is an empty directory.
        sec = v["secret"]
        d = os.path.join(self.node.root, ".kubelet", self.name, "secrets", v["name"])
        os.makedirs(d, exist_ok=True)
        files = self.node.secrets.get(sec["secretName"])
        if files is None and not sec.get("optional"):
            raise RuntimeError(f"secret {sec['secretName']} missing and not optional")
        for fname, data in (files or {}).items():
            p = os.path.join(d, fname)
            with open(p, "wb") as f:
                f.write(data)
            os.chmod(p, sec.get("defaultMode", 0o644))
        return d, True

    def podman_args(self, c, detach=True):
        """The `podman run` arguments for container `c` (a dict of the template)."""
        ctr = f"{self.name}-{c['name']}"
        args = ["run", "--detach=" + str(detach).lower(), "--name", ctr, "--pull=never",
                "--network", f"ns:/run/netns/{self.node.netns}",
                # kubelet does not set up a seccomp profile unless the pod asks for one.
                "--security-opt", "seccomp=unconfined",
                "--label", f"rdmanet-test-pod={self.name}"]
        if self.spec.get("hostPID"):
            args += ["--pid", "host"]
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            args += ["--privileged"]
        if sc.get("readOnlyRootFilesystem"):
            # A kubelet gives no tmpfs on /tmp or /run: nor does this.
            args += ["--read-only", "--read-only-tmpfs=false"]
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        caps = sc.get("capabilities", {})
        for cap in caps.get("drop", []):
            args += ["--cap-drop", cap]
        for cap in caps.get("add", []):
            args += ["--cap-add", cap]
        limits = c.get("resources", {}).get("limits", {})
        requests = c.get("resources", {}).get("requests", {})
        if "cpu" in requests:
            # What a kubelet makes of a CPU request: cgroup shares, 1024 per CPU.
            args += ["--cpu-shares", str(max(2, int(_cpus(requests["cpu"]) * 1024)))]
        if "cpu" in limits:
            args += ["--cpus", str(_cpus(limits["cpu"]))]
        if "memory" in limits:
            args += ["--memory", str(_bytes(limits["memory"]))]
        if "workingDir" in c:
            args += ["--workdir", c["workingDir"]]
        args += self._env(c)
        vols = {v["name"]: v for v in self.spec.get("volumes", [])}
        for m in c.get("volumeMounts", []):
            src, secret = self._volume_dir(vols[m["name"]])
            opts = ["rbind", "ro" if (m.get("readOnly") or secret) else "rw"]
            opts.append("rslave" if m.get("mountPropagation") == "HostToContainer" else "rprivate")
            args += ["--volume", f"{src}:{m['mountPath']}:{','.join(opts)}"]
        # command replaces the image's ENTRYPOINT, args its CMD (the Kubernetes rule).
        if "command" in c:
            args += ["--entrypoint", json.dumps(c["command"])]
        args.append(c["image"])
        args += c.get("args", [])
        return ctr, args

    def run_init(self, c, timeout=120):
        ctr, args = self.podman_args(c, detach=False)
        self.podman("rm", "-f", ctr, check=False)
        r = self.podman(*args, check=False, timeout=timeout)
        log = self.podman("logs", ctr, check=False)
        self.logs[c["name"]] = (log.stdout or "") + (log.stderr or "")
        self.podman("rm", "-f", ctr, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"init container {c['name']} exited {r.returncode}: "
                               f"{self.logs[c['name']][-2000:]} {r.stderr[-1000:]}")

    def start(self):
        for c in self.spec.get("initContainers", []):
            self.run_init(c)
        for c in self.spec["containers"]:
            self._start_container(c)
            state = self.states[c["name"]] = ProbeState()
            if "readinessProbe" not in c:
                state.ready = True
            for kind in ("readinessProbe", "livenessProbe"):
                if kind in c:
                    t = threading.Thread(target=self._probe_loop, args=(c, kind, state),
                                         daemon=True)
                    t.start()
                    self._threads.append(t)

    def _start_container(self, c):
        ctr, args = self.podman_args(c)
        self.podman("rm", "-f", ctr, check=False)
        self.podman(*args)

    def container(self, name):
        return f"{self.name}-{name}"

    def exec_overhead(self, name):
        """What `podman exec` itself costs here (its median of three), which a kubelet's
        CRI exec does not add: probe timeouts count the command only."""
        ctr = self.container(name)
        times = []
        for _ in range(3):
            t0 = time.monotonic()
            self.podman("exec", ctr, "true", check=False)
            times.append(time.monotonic() - t0)
        return sorted(times)[1]

    def probe_once(self, c, kind, overhead=0.0):
        """(ok, seconds the command took, detail) for one run of the probe."""
        probe = c[kind]
        timeout = probe.get("timeoutSeconds", 1)
        t0 = time.monotonic()
        if "exec" in probe:
            try:
                r = self.podman("exec", self.container(c["name"]), *probe["exec"]["command"],
                                check=False, timeout=timeout + overhead + 30)
            except subprocess.TimeoutExpired:
                return False, time.monotonic() - t0, "hung"
            took = max(0.0, time.monotonic() - t0 - overhead)
            ok = r.returncode == 0 and took <= timeout
            detail = f"rc {r.returncode}, {took:.2f} s of {timeout} s: {r.stderr.strip()[-300:]}"
            return ok, took, detail
        get = probe["httpGet"]
        port = get["port"]
        if isinstance(port, str):
            port = [p["containerPort"] for p in c["ports"] if p.get("name") == port][0]
        url = f"http://{self.node.ip}:{port}{get.get('path', '/')}"
        # From the node's network namespace, where the kubelet sends it.
        r = subprocess.run(["ip", "netns", "exec", self.node.netns, "python3", "-c",
                            "import sys, urllib.request\n"
                            "try:\n"
                            f"  r = urllib.request.urlopen({url!r}, timeout={timeout})\n"
                            "  print(r.status)\n"
                            "except urllib.error.HTTPError as e:\n"
                            "  print(e.code)\n"],
                           capture_output=True, text=True, timeout=timeout + 30)
        took = time.monotonic() - t0
        status = r.stdout.strip()
        ok = status.isdigit() and 200 <= int(status) < 400
        return ok, took, f"GET {url}: {status or r.stderr.strip()[-300:]}"

    def _probe_loop(self, c, kind, state):
        probe = c[kind]
        if self._stop.wait(probe.get("initialDelaySeconds", 0)):
            return
        overhead = self.exec_overhead(c["name"]) if "exec" in probe else 0.0
        failures = 0
        while not self._stop.is_set():
            ok, took, detail = self.probe_once(c, kind, overhead)
            state.results.append((time.time(), kind, ok, took, detail))
            failures = 0 if ok else failures + 1
            if kind == "readinessProbe":
                if ok:
                    state.ready = True
                elif failures >= probe.get("failureThreshold", 3):
                    state.ready = False
            elif failures >= probe.get("failureThreshold", 3):
                # The kubelet restarts a container whose liveness probe fails.
                state.restarts += 1
                failures = 0
                self.podman("rm", "-f", self.container(c["name"]), check=False)
                self._start_container(c)
                if self._stop.wait(probe.get("initialDelaySeconds", 0)):
                    return
            if self._stop.wait(probe.get("periodSeconds", 10)):
                return

    def wait_ready(self, name, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.states[name].ready:
                return True
            time.sleep(0.2)
        return False

    def logs_of(self, name):
        r = self.podman("logs", self.container(name), check=False)
        return (r.stdout or "") + (r.stderr or "")

    def pid_of(self, name):
        r = self.podman("inspect", "-f", "{{.State.Pid}}", self.container(name), check=False)
        return int(r.stdout.strip() or 0)

    def stop(self):
        """Termination: SIGTERM to every container, SIGKILL after the grace period."""
        self._stop.set()
        grace = self.spec.get("terminationGracePeriodSeconds", 30)
        for c in self.spec["containers"]:
            self.podman("stop", "-t", str(grace), self.container(c["name"]), check=False)
        for c in self.spec["containers"]:
            r = self.podman("logs", self.container(c["name"]), check=False)
            self.logs[c["name"]] = (r.stdout or "") + (r.stderr or "")
            self.podman("rm", "-f", self.container(c["name"]), check=False)
        for t in self._threads:
            t.join(timeout=5)
