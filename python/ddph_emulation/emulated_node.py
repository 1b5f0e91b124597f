"""The node a rank of ``ddp-sim launch --nnodes N`` runs on: its host name and its Gloo address.

The launcher gives every rank its node's host name (``DDPH_NODE_HOSTNAME``, "node1") and loopback
address (``DDPH_NODE_ADDR``, 127.1.0.2) and the number of nodes (``DDPH_NODES``, common to all);
ddph_audit's registry installs this module's two instrumentors when ``DDPH_NODES`` is set, with or
without ``--audit`` (docs/multi-node.md): the host name at once, Gloo's address when
``torch.distributed`` is imported:

- ``NodeHostInstrumentor``: ``socket.gethostname``, ``os.uname().nodename``, ``platform.node``
  and ``platform.uname().node`` answer the node's name, and ``socket.gethostbyname`` /
  ``getaddrinfo`` resolve "node<k>" to node k's address, as a cluster's DNS would;
- ``NodeGlooInstrumentor``: a ``ProcessGroupGloo`` that torch makes without options of its own
  (``init_process_group("gloo")``, ``new_group``) binds its device to the node's address
  (``ProcessGroupGloo.create_device(hostname=...)``), so each node's pairs use that node's ports.

Both read the variables when called, not when installed: a fork server installs them once, and
each rank it forks answers with the node its environment names. Without those variables (the
server itself, a process outside the launch) everything answers as it did.
"""

import os
import platform
import socket

from ddph_audit import environment
from ddph_audit.instrumentor import Instrumentor


def node_address(node):
    """Node k's address: the launcher's rule (core/launch/src/nodes.cpp, nodeAddress)."""
    return "127.1.%d.%d" % (node // 254, node % 254 + 1)


def emulated_address(name):
    """The address of host "node<k>" for an emulated node k, else None."""
    if not isinstance(name, str) or not name.startswith("node") or not name[4:].isdigit():
        return None
    try:
        nodes = int(os.environ.get(environment.NODES, "0"))
    except ValueError:
        return None
    k = int(name[4:])
    return node_address(k) if k < nodes and name == "node%d" % k else None


class NodeHostInstrumentor(Instrumentor):
    """The node's host name and the other nodes' addresses (standard library only)."""

    NAME = "the emulated node's host name (--nnodes)"

    def _instrument(self):
        gethostname = socket.gethostname
        uname = os.uname
        platform_uname = platform.uname
        gethostbyname = socket.gethostbyname
        getaddrinfo = socket.getaddrinfo

        def node_gethostname():
            return os.environ.get(environment.NODE_HOSTNAME) or gethostname()

        def node_uname():
            real = uname()
            name = os.environ.get(environment.NODE_HOSTNAME)
            if not name:
                return real
            fields = list(real)
            fields[1] = name
            return os.uname_result(fields)

        def node_platform_uname():
            real = platform_uname()
            name = os.environ.get(environment.NODE_HOSTNAME)
            return real._replace(node=name) if name else real

        def node_platform_node():
            return node_platform_uname().node

        def node_gethostbyname(name):
            return emulated_address(name) or gethostbyname(name)

        def node_getaddrinfo(host, *args, **kwargs):
            return getaddrinfo(emulated_address(host) or host, *args, **kwargs)

        self.patch(socket, "gethostname", node_gethostname)
        self.patch(os, "uname", node_uname)
        self.patch(platform, "uname", node_platform_uname)
        self.patch(platform, "node", node_platform_node)
        self.patch(socket, "gethostbyname", node_gethostbyname)
        self.patch(socket, "getaddrinfo", node_getaddrinfo)


class NodeGlooInstrumentor(Instrumentor):
    """Gloo process groups bound to the node's address."""

    NAME = "the emulated node's Gloo address (--nnodes)"

    def _instrument(self):
        from torch.distributed import distributed_c10d as c10d
        base = getattr(c10d, "ProcessGroupGloo", None)
        if base is None:  # torch built without Gloo
            return

        class ProcessGroupGloo(base):
            # What torch's own binding does without options (GLOO_SOCKET_IFNAME aside), with the
            # device made for the node's address instead of the machine's host name.
            def __init__(self, store, rank, size, *args, **kwargs):
                addr = os.environ.get(environment.NODE_ADDR)
                given = args[0] if args else kwargs.get("timeout")
                if not addr or os.environ.get("GLOO_SOCKET_IFNAME") or len(args) > 1 or \
                        isinstance(given, base._Options) or set(kwargs) - {"timeout"}:
                    base.__init__(self, store, rank, size, *args, **kwargs)
                    return
                options = base._Options()
                options._devices = [base.create_device(hostname=addr)]
                if given is not None:
                    options._timeout = given
                options._threads = 2  # torch's: two per device
                base.__init__(self, store, rank, size, options)

        ProcessGroupGloo.__module__ = base.__module__
        ProcessGroupGloo.__qualname__ = base.__qualname__
        self.patch(c10d, "ProcessGroupGloo", ProcessGroupGloo)
