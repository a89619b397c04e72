#!/usr/bin/env python3
"""Host side of the lab's two-node tier: carries out what a guest asks on its console.

Usage: hostctl.py NODE=CONSOLE_LOG,MONITOR_SOCKET,CONTROL_SOCKET ...

run.sh starts one hostctl per boot of the two guests and kills it when they are gone. A guest
asks with a line on its console (lib.sh's host_cmd writes it):

    LAB-HOST id=ID node=a|b|both set_link NETDEV on|off

hostctl runs `set_link NETDEV on|off` on the human monitor of that node's QEMU (both: node a's,
then node b's) and answers the guest that asked on the guest's second serial port (ttyS1, a
socket chardev here), one line:

    LAB-ACK id=ID rc=0|1 out=TEXT

rc=0 when every monitor took the command without a word (set_link prints nothing when it
works). Only set_link is carried out: anything else is answered with rc=1. Each request is
logged on stdout (run.sh prefixes it with "host| ").
"""
import os
import re
import select
import socket
import sys
import time

REQUEST = re.compile(r"LAB-HOST id=(\S+) node=(a|b|both) (.*)$")
ALLOWED = re.compile(r"set_link [A-Za-z0-9_-]+ (on|off)$")


def log(msg):
    print(f"hostctl: {msg}", flush=True)


class Node:
    def __init__(self, name, console, monitor, control):
        self.name, self.console, self.monitor_path, self.control_path = name, console, monitor, control
        self.offset = 0
        self.partial = b""
        self.control = None

    def new_lines(self):
        """Complete console lines written since the last call."""
        try:
            with open(self.console, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *lines, self.partial = data.split(b"\n")
        return [line.decode("utf-8", "replace").rstrip("\r") for line in lines]

    def monitor(self, command, timeout=10.0):
        """Runs one HMP command; returns what the monitor printed for it."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.monitor_path)
            read_to_prompt(s)  # the banner
            s.sendall(command.encode() + b"\n")
            out = read_to_prompt(s)
        finally:
            s.close()
        # The monitor echoes the command line as it is typed (with terminal escapes), up to
        # the first line break: what follows it is the command's output.
        said = out.replace("\r", "").partition("\n")[2]
        return " ".join(l.strip() for l in said.split("\n") if l.strip())

    def answer(self, line):
        """One line to the guest's ttyS1 (connected once, kept open)."""
        deadline = time.monotonic() + 10
        while self.control is None:
            try:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.connect(self.control_path)
                c.setblocking(False)
                self.control = c
            except OSError:
                if time.monotonic() > deadline:
                    log(f"{self.name}: cannot reach the guest's control port {self.control_path}")
                    return
                time.sleep(0.1)
        self.control.setblocking(True)
        self.control.sendall(line.encode() + b"\n")
        self.control.setblocking(False)

    def drain(self):
        """Whatever the guest sent on ttyS1 (nothing is expected) must not pile up."""
        if self.control is None:
            return
        try:
            while select.select([self.control], [], [], 0)[0]:
                if not self.control.recv(4096):
                    self.control.close()
                    self.control = None
                    return
        except OSError:
            self.control = None


def read_to_prompt(s):
    buf = b""
    while not buf.endswith(b"(qemu) "):
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf.decode("utf-8", "replace").removesuffix("(qemu) ")


def handle(nodes, asker, line):
    m = REQUEST.search(line)
    if not m:
        return
    rid, target, command = m.group(1), m.group(2), m.group(3).strip()
    if not ALLOWED.match(command):
        rc, out = 1, f"refused: only 'set_link NETDEV on|off' is carried out, not '{command}'"
    else:
        rc, outs = 0, []
        for name in (["a", "b"] if target == "both" else [target]):
            if name not in nodes:
                rc = 1
                outs.append(f"{name}: no such node")
                continue
            try:
                said = nodes[name].monitor(command)
            except OSError as e:
                said = f"monitor unreachable: {e}"
            if said:
                rc = 1
                outs.append(f"{name}: {said}")
        out = "; ".join(outs) or "done"
    log(f"{asker.name} asked id={rid} node={target} '{command}': rc={rc} {out}")
    asker.answer(f"LAB-ACK id={rid} rc={rc} out={out}")


def main(argv):
    nodes = {}
    for arg in argv:
        name, _, paths = arg.partition("=")
        console, monitor, control = paths.split(",")
        nodes[name] = Node(name, console, monitor, control)
    if not nodes:
        sys.exit("usage: hostctl.py NODE=CONSOLE_LOG,MONITOR_SOCKET,CONTROL_SOCKET ...")
    while True:
        for node in nodes.values():
            for line in node.new_lines():
                if "LAB-HOST " in line:
                    handle(nodes, node, line)
            node.drain()
        time.sleep(0.1)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        pass
