"""The emulated node of ``ddp-sim launch --nnodes`` in one process: the host name four ways, the
other nodes' names resolved, a gloo group bound to the node's address, everything as it was
without the variables, and an uninstrument that leaves socket, os, platform and torch as it found
them."""

import datetime
import os
import platform
import socket
import tempfile
import unittest

import torch
import torch.distributed as dist

from ddph_audit.environment import NODE_ADDR, NODE_HOSTNAME, NODES
from ddph_emulation.emulated_node import (NodeGlooInstrumentor,
                                      NodeHostInstrumentor, emulated_address, node_address)

PATCHED = (socket, os, platform, dist.distributed_c10d)
VARIABLES = (NODES, NODE_ADDR, NODE_HOSTNAME)


def namespaces():
    return [dict(vars(owner)) for owner in PATCHED]


class EmulatedNode(unittest.TestCase):
    def setUp(self):
        self.saved = {k: os.environ.get(k) for k in VARIABLES}
        self.real = socket.gethostname()
        self.before = namespaces()
        self.host = NodeHostInstrumentor()
        self.gloo = NodeGlooInstrumentor()
        self.host.instrument()
        self.gloo.instrument()

    def tearDown(self):
        self.gloo.uninstrument()
        self.host.uninstrument()
        if dist.is_initialized():
            dist.destroy_process_group()
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def on_node(self, k, nodes=2):
        os.environ.update({NODES: str(nodes), NODE_ADDR: node_address(k),
                           NODE_HOSTNAME: "node%d" % k})

    def test_the_host_name_is_the_nodes_four_ways(self):
        self.on_node(1)
        self.assertEqual(socket.gethostname(), "node1")
        self.assertEqual(os.uname().nodename, "node1")
        self.assertEqual(platform.node(), "node1")
        self.assertEqual(platform.uname().node, "node1")

    def test_without_the_variables_everything_answers_as_before(self):
        for k in VARIABLES:
            os.environ.pop(k, None)
        self.assertEqual(socket.gethostname(), self.real)
        self.assertEqual(os.uname().nodename, self.real)
        self.assertIsNone(emulated_address("node0"))

    def test_the_nodes_names_resolve_to_their_addresses(self):
        self.on_node(0, nodes=3)
        self.assertEqual(node_address(0), "127.1.0.1")
        self.assertEqual(node_address(254), "127.1.1.1")
        self.assertEqual(socket.gethostbyname("node2"), "127.1.0.3")
        self.assertEqual(socket.getaddrinfo("node1", 80, socket.AF_INET)[0][4][0], "127.1.0.2")
        self.assertIsNone(emulated_address("node3"))  # no such node
        self.assertIsNone(emulated_address("node01"))
        self.assertEqual(socket.gethostbyname("localhost"), "127.0.0.1")

    def test_a_gloo_group_made_without_options_runs_on_the_nodes_device(self):
        self.on_node(1)
        with tempfile.TemporaryDirectory() as d:
            store = dist.FileStore(os.path.join(d, "store"), 1)
            pg = dist.distributed_c10d.ProcessGroupGloo(store, 0, 1,
                                                        timeout=datetime.timedelta(seconds=30))
            self.assertIsInstance(pg, torch._C._distributed_c10d.ProcessGroupGloo)
            t = torch.ones(2)
            pg.allreduce([t]).wait()
            self.assertEqual(t.tolist(), [1.0, 1.0])

    def test_init_process_group_runs_on_the_node(self):
        self.on_node(1)
        with tempfile.TemporaryDirectory() as d:
            dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "s"),
                                    rank=0, world_size=1)
            t = torch.ones(1)
            dist.all_reduce(t)
            self.assertEqual(t.item(), 1.0)

    def test_uninstrument_leaves_everything_as_it_found_it(self):
        self.gloo.uninstrument()
        self.host.uninstrument()
        self.assertEqual(namespaces(), self.before)


if __name__ == "__main__":
    unittest.main()
