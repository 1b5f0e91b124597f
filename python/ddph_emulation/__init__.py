"""ddph_emulation: what a program needs that this machine lacks, served on the CPU.

Not recording: these instrumentors change what the program meets, so that a GPU program, a
multi-node job or a downloading dataset runs unmodified on one machine's CPU ranks
(docs/cpu-emulation.md, docs/multi-node.md). ``ddp-sim launch`` turns them on through the
environment (``DDPH_CPU``, ``DDPH_STAND_IN_DATA``, ``DDPH_NODES``: ddph_audit/environment.py),
and ddph_audit's registry installs them when their library is imported:

- ``cuda_on_cpu``: ``--cpu``, the CUDA face of torch and NCCL served by the CPU and gloo, with
  ``sync_batchnorm_on_cpu`` for ``nn.SyncBatchNorm``;
- ``stand_in_data``: ``--stand-in-data``, torchvision's downloading datasets served offline;
- ``emulated_node``: ``--nnodes``, each rank's node's host name and Gloo address.

The one ``emulation`` event of ``--cpu`` is written through the recorder when the process records.
"""
