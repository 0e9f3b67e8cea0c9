"""torch.utils for dtr: checkpoint (activation checkpointing over dtr's checkpoint
regions) and data (Dataset, TensorDataset, DataLoader, random_split)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
