"""granary - PyTorch on a granary mount: hand the mount each epoch's order
of files (an epoch plan), so that it fetches ahead what the loader reads
next and keeps in its disk cache what the epoch needs soonest.

    sampler = granary.PlannedSampler(RandomSampler(ds), ds)
    loader = DataLoader(ds, sampler=sampler, num_workers=8)

Standard library only: torch is never imported (samplers are duck-typed).
"""
from .plan import ADD_MAX, Plan, chunks, mount_root, plans
from .sampler import PlannedSampler, dataset_paths

__version__ = "0.1.0"
__all__ = ["ADD_MAX", "Plan", "PlannedSampler", "chunks", "dataset_paths",
           "mount_root", "plans"]
