"""ddph_launch: how ``ddp-sim launch`` starts Python ranks fast.

``fork_server.py`` is the fork server: one interpreter that imports torch once (and, with
``--audit`` / ``--cpu``, the recorder and the CPU emulation, through the same sitecustomize an
exec'd rank runs), then forks each rank into the user's unmodified program. It is run as a script
(``python3 [the program's interpreter options] fork_server.py``), imports nothing from this
package, and speaks to the launcher over its standard input (a Unix socket). docs/ddp-sim.md,
"How ranks start".

``world_stop.py`` is the rule by which ``ddp-sim launch``'s supervisor stops a world of ranks,
ported once for the ranks a Python launcher starts (the pytest plugin's: ddph_pytest/world.py).
"""
