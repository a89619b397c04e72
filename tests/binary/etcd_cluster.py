"""A real 3-member etcd cluster on 127.0.0.1 for the cluster-IPAM tests and
benchmark: Debian's etcd-server, clients over TLS with client certificates
(a CA, server and client certificates made with the openssl CLI), peers over
plain HTTP. Each member also listens for clients on plain HTTP (for
LossyProxy, which must read the answers it drops). Everything lives in one
temporary directory; stop() kills the members and removes it.

Also: simulated nodes (a node name file and a data dir each) that drive the
real rdmanet-ipam binary through the CNI protocol, and the invariant check
"no block has two owners, no address is held twice", read from etcd with
etcdctl (not with rdmanet's own client) and from every node's store.
"""

import ipaddress
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time


def _free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class EtcdCluster:
    def __init__(self, members=3):
        self.dir = tempfile.mkdtemp(prefix="rdmanet-etcd-")
        self.names = [f"m{i}" for i in range(members)]
        ports = _free_ports(3 * members)
        self.client_ports = ports[:members]
        self.peer_ports = ports[members:2 * members]
        self.http_ports = ports[2 * members:]
        self.procs = {}
        self._make_certs()

    # --- TLS material ---
    def _make_certs(self):
        d = self.dir
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                 "-subj", "/CN=rdmanet-test-ca", cwd=d)
        # etcd 3.4's HTTP/JSON gateway dials the member's own gRPC port with the
        # server certificate as its client certificate: without clientAuth,
        # every gateway call fails with 503 "connection closed".
        for name, ext in (("server", "subjectAltName=IP:127.0.0.1\n"
                                     "extendedKeyUsage=serverAuth,clientAuth"),
                          ("client", "extendedKeyUsage=clientAuth")):
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write(ext + "\n")
            _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", name + ".key", "-out", name + ".csr", "-subj",
                     "/CN=rdmanet-" + name, cwd=d)
            _openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                     "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile",
                     name + ".ext", cwd=d)
        self.tls = {"ca": f"{d}/ca.pem", "cert": f"{d}/client.pem", "key": f"{d}/client.key"}

    @property
    def endpoints(self):
        return [f"https://127.0.0.1:{p}" for p in self.client_ports]

    @property
    def http_endpoints(self):
        return [f"http://127.0.0.1:{p}" for p in self.http_ports]

    def start(self):
        for i in range(len(self.names)):
            self.start_member(i)
        self.wait_healthy()
        return self

    def start_member(self, i):
        name = self.names[i]
        with open(os.path.join(self.dir, name + ".log"), "ab") as log:
            self.procs[i] = self._spawn(name, i, log)

    def _spawn(self, name, i, log):
        initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer_ports))
        cmd = ["etcd", "--name", name, "--data-dir", os.path.join(self.dir, name + ".data"),
               "--listen-client-urls",
               f"https://127.0.0.1:{self.client_ports[i]},http://127.0.0.1:{self.http_ports[i]}",
               "--advertise-client-urls", f"https://127.0.0.1:{self.client_ports[i]}",
               "--listen-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
               "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
               "--initial-cluster", initial, "--initial-cluster-state", "new",
               "--initial-cluster-token", "rdmanet-test",
               "--cert-file", f"{self.dir}/server.pem", "--key-file", f"{self.dir}/server.key",
               "--trusted-ca-file", f"{self.dir}/ca.pem", "--client-cert-auth",
               "--heartbeat-interval", "50", "--election-timeout", "500"]
        return subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)

    def etcdctl(self, *args, endpoints=None, check=True):
        cmd = ["etcdctl", "--endpoints", ",".join(endpoints or self.endpoints),
               "--cacert", self.tls["ca"], "--cert", self.tls["cert"], "--key", self.tls["key"],
               "--dial-timeout", "2s", "--command-timeout", "5s", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "ETCDCTL_API": "3"})
        if check and r.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {r.stderr.strip()}")
        return r

    def wait_healthy(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            live = [e for i, e in enumerate(self.endpoints) if self.procs.get(i)]
            r = self.etcdctl("endpoint", "health", endpoints=live, check=False)
            if r.returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("etcd cluster not healthy after %ds; logs in %s" % (timeout, self.dir))

    def leader(self):
        """The index of the current leader."""
        live = [e for i, e in enumerate(self.endpoints) if self.procs.get(i)]
        r = self.etcdctl("endpoint", "status", "-w", "json", endpoints=live)
        for s in json.loads(r.stdout):
            if s["Status"]["leader"] == s["Status"]["header"]["member_id"]:
                return self.endpoints.index(s["Endpoint"])
        raise RuntimeError("no leader")

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.procs[i] = None

    def get_prefix(self, prefix, field="value"):
        """{key: value} (or another field of the kv, e.g. mod_revision) under prefix,
        read with etcdctl."""
        r = self.etcdctl("get", "--prefix", prefix, "-w", "json")
        doc = json.loads(r.stdout)
        import base64
        return {base64.b64decode(kv["key"]).decode():
                base64.b64decode(kv.get("value", "")).decode() if field == "value" else kv[field]
                for kv in doc.get("kvs", [])}

    def stop(self):
        for p in self.procs.values():
            if p:
                p.send_signal(signal.SIGKILL)
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class LossyProxy:
    """Plain-HTTP proxies, one in front of each etcd member port given, that forward
    the requests of the connections numbered in `drop` (1-based, counted across all
    of them) but answer them by closing the connection: the request takes effect,
    the client never learns it (as when a leader changes after committing). Use as
    a context manager."""

    def __init__(self, ports, drop):
        self.drop, self.dropped, self.count = set(drop), 0, 0
        self.lock = threading.Lock()
        self.socks, self.urls, self.threads = [], [], []
        for port in ports:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            self.socks.append(s)
            self.urls.append(f"http://127.0.0.1:{s.getsockname()[1]}")
            self.threads.append(threading.Thread(target=self._serve, args=(s, port), daemon=True))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        for s in self.socks:
            s.close()

    @staticmethod
    def _read_request(conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

    def _serve(self, sock, port):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with self.lock:
                self.count += 1
                number = self.count
            with conn, socket.create_connection(("127.0.0.1", port)) as up:
                up.sendall(self._read_request(conn))
                answer = b""
                while chunk := up.recv(65536):
                    answer += chunk
                if number in self.drop:
                    self.dropped += 1
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(answer)


class Node:
    """A simulated node: its own name, node-name file and IPAM data dir."""

    def __init__(self, binary, root, name):
        self.binary, self.name = binary, name
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.name_file = os.path.join(self.dir, "node-name")
        with open(self.name_file, "w") as f:
            f.write(name + "\n")
        self.data = os.path.join(self.dir, "data")

    def conf(self, network, cluster, ranges, **ipam_extra):
        c = dict(cluster)
        c["nodeNameFile"] = self.name_file
        ipam = {"type": "rdmanet-ipam", "dataDir": self.data, "ranges": ranges, "cluster": c}
        ipam.update(ipam_extra)
        return json.dumps({"cniVersion": "1.1.0", "name": network, "type": "rdmanet", "ipam": ipam})

    def cni(self, command, cid, conf, ifname="net1", trace=None):
        env = {"CNI_COMMAND": command, "CNI_CONTAINERID": cid, "CNI_IFNAME": ifname,
               "CNI_NETNS": "/proc/self/ns/net", "CNI_PATH": "/nonexistent", "PATH": os.environ["PATH"]}
        if trace is not None:
            # A sanitizer build's leak checker cannot run under ptrace (strace).
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        cmd = [self.binary] if trace is None else ["strace", "-f", "-qq", "-o", trace,
                                                   "-e", "trace=connect", self.binary]
        # A call that hangs is a failure, not a stuck test run.
        r = subprocess.run(cmd, input=conf, capture_output=True, text=True, env=env, timeout=120)
        out = json.loads(r.stdout) if r.stdout.strip() else {}
        return r.returncode, out, r.stderr

    def blocks(self, network):
        try:
            with open(os.path.join(self.data, network, "blocks.json")) as f:
                return [b["block"] for b in json.load(f)["blocks"]]
        except FileNotFoundError:
            return []

    def leases(self, network):
        d = os.path.join(self.data, network, "leases")
        if not os.path.isdir(d):
            return []
        return [n for n in os.listdir(d) if not n.startswith(".tmp")]


def check_invariant(cluster, nodes, network, prefix="/rdmanet/ipam"):
    """No block has two owners, no address is held twice; every node hands out
    only inside blocks etcd says are its own. Returns (etcd owners, all leases)."""
    kvs = cluster.get_prefix(f"{prefix}/{network}/blocks/")
    owners = {}
    for key, value in kvs.items():
        block = key.rsplit("/", 1)[1].replace("_", "/")
        owners[block] = json.loads(value)["node"]
    # Blocks of different sizes (a blockSize change) must not overlap either.
    nets = sorted((ipaddress.ip_network(b) for b in owners), key=lambda n: (n.version, n))
    for a, b in zip(nets, nets[1:]):
        assert a.version != b.version or not a.overlaps(b), f"blocks {a} and {b} overlap in etcd"
    seen_blocks = {}
    seen_ips = {}
    for n in nodes:
        for b in n.blocks(network):
            assert b not in seen_blocks, f"block {b} listed by {seen_blocks[b]} and {n.name}"
            seen_blocks[b] = n.name
            assert owners.get(b) == n.name, f"{n.name} lists {b}, etcd says {owners.get(b)}"
        nets = [ipaddress.ip_network(b) for b in n.blocks(network)]
        for ip in n.leases(network):
            assert ip not in seen_ips, f"{ip} held by {seen_ips[ip]} and {n.name}"
            seen_ips[ip] = n.name
            addr = ipaddress.ip_address(ip)
            assert any(addr in net for net in nets), f"{n.name} leased {ip} outside its blocks {nets}"
    return owners, seen_ips
