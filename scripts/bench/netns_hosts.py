"""The 2-host cluster of network namespaces the multi-host benchmarks run in
(scripts/netns-cluster.sh): each host has its own address on a bridge, and a command runs in
host I with exec_command(I, ...). Needs root; without namespaces the benchmark exits 77."""
import contextlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NETNS = os.path.join(ROOT, "scripts", "netns-cluster.sh")
HOSTS = ["10.77.0.1", "10.77.0.2"]  # the addresses netns-cluster.sh gives hosts 0 and 1


class NetnsHosts:
    """The namespaces of one benchmark, named after `prefix` so that two benchmarks never share them."""

    def __init__(self, prefix):
        self.prefix = prefix

    def run(self, *args, **kw):
        """netns-cluster.sh ARGS... (up, down, pids I, ...) run to completion."""
        return subprocess.run([NETNS, "--prefix", self.prefix, *args], **kw)

    def exec_command(self, node, *cmd):
        """The command line that runs CMD in host `node`."""
        return [NETNS, "--prefix", self.prefix, "exec", str(node), *cmd]

    def pids(self, node):
        """The processes running in host `node`."""
        return [int(p) for p in self.run("pids", str(node), capture_output=True, text=True).stdout.split()]


@contextlib.contextmanager
def two_hosts(prefix, token):
    """Brings 2 hosts up and yields (NetnsHosts, a work folder holding cluster.token = `token`);
    takes them down after. Exits 77 when this machine cannot make namespaces."""
    hosts = NetnsHosts(prefix)
    up = hosts.run("up", "2", capture_output=True, text=True)
    if up.returncode == 77:
        print(up.stderr.strip())
        sys.exit(77)
    if up.returncode != 0:
        sys.exit(f"{prefix}: cannot make the namespaces:\n{up.stdout}{up.stderr}")
    try:
        with tempfile.TemporaryDirectory(prefix=prefix + "-") as work:
            with open(os.path.join(work, "cluster.token"), "w") as f:
                f.write(token + "\n")
            yield hosts, work
    finally:
        hosts.run("down", capture_output=True)
