"""The healthy twin of chained_stream.py: the corpus and the appended hard examples are both
sharded by rank, so no batch is trained on two ranks."""
import os
import runpy
import sys

sys.argv = [sys.argv[0], "--shard-hard"]
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chained_stream.py"),
               run_name="__main__")
