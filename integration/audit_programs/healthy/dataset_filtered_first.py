"""The healthy twin of dataset_filtered_after_sampler.py: the dataset is filtered before its
DistributedSampler is made, so the sampler's lengths are the filtered dataset's."""
import os
import runpy
import sys

sys.argv = [sys.argv[0], "--filter-first"]
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                            "dataset_filtered_after_sampler.py"), run_name="__main__")
