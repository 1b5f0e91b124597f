"""A program that cannot start: it imports a module this machine does not have.

Every rank fails at the same import before any distributed work. The audit gives one finding for
all ranks, with the import as its cause.
"""
import torch
import torch.distributed as dist
import wandb_logger_of_our_team  # noqa: F401  (not installed here)


def main():
    dist.init_process_group("gloo")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
