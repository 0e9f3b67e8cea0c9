"""torch.utils.data for dtr: Dataset, IterableDataset, TensorDataset, Subset,
random_split, the samplers, default_collate and DataLoader (single process).

Shuffling draws a permutation from a numpy generator seeded from dtr's
generator (or from `generator` when given: an int seed or a numpy Generator),
so dtr.manual_seed(s) makes the batch order reproducible. The order is not
PyTorch's own (that needs torch's generator), only its distribution.
"""
import collections.abc
import math
import numbers

import numpy as _np

from .. import Tensor, _C, stack, tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "BatchSampler", "default_collate", "DataLoader"]


class Dataset:
    """A map-style dataset: subclass it with __getitem__(index) and __len__()."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read by iterating it: subclass it with __iter__()."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class TensorDataset(Dataset):
    """torch.utils.data.TensorDataset(*tensors): sample i is the tuple of tensors[k][i].
    ValueError unless every tensor has the same first dim."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        n = tensors[0].shape[0] if tensors[0].dim() else None
        if any(t.dim() == 0 or t.shape[0] != n for t in tensors):
            raise ValueError("Size mismatch between tensors: every tensor needs the same first "
                             f"dim, got shapes {[list(t.shape) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The samples of several datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        self.cumulative_sizes = list(_np.cumsum([len(d) for d in self.datasets]))

    def __len__(self):
        return int(self.cumulative_sizes[-1]) if self.cumulative_sizes else 0

    def __getitem__(self, index):
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for a dataset of {len(self)} samples")
        k = int(_np.searchsorted(self.cumulative_sizes, index, side="right"))
        start = 0 if k == 0 else int(self.cumulative_sizes[k - 1])
        return self.datasets[k][index - start]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def _rng(generator):
    """A numpy Generator: `generator` itself, seeded by an int, or seeded from dtr's
    generator (so dtr.manual_seed fixes it)."""
    if isinstance(generator, _np.random.Generator):
        return generator
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        return _np.random.default_rng(int(generator))
    if generator is None:
        seed = _C.randint(0, 2 ** 62, [2], None, None, False).tolist()
        return _np.random.default_rng(seed)
    raise TypeError(f"generator must be None, an int seed or a numpy.random.Generator, got "
                    f"{type(generator).__name__}")


def random_split(dataset, lengths, generator=None):
    """torch.utils.data.random_split: disjoint Subsets of the given lengths (ints summing
    to len(dataset), or fractions summing to 1: floors, the remainder dealt one by one
    from the first, as PyTorch) over a random permutation. ValueError otherwise."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1 and not all(
            isinstance(v, numbers.Integral) for v in lengths):
        for f in lengths:
            if not 0 <= f <= 1:
                raise ValueError(f"Fraction {f} is not between 0 and 1")
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _rng(generator).permutation(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out


class Sampler:
    """Yields dataset indices; subclass it with __iter__ (and __len__)."""

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh random permutation of the indices on every iteration (or num_samples
    draws with replacement when replacement=True)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        self._rng = None

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        if self._rng is None or self.generator is None:
            self._rng = _rng(self.generator)
        n = len(self.data_source)
        if self.replacement:
            return iter(self._rng.integers(0, n, self.num_samples).tolist())
        return iter(self._rng.permutation(n).tolist()[:self.num_samples])

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of batch_size (the last one shorter
    unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def default_collate(batch):
    """torch.utils.data.default_collate: a list of samples to one batch. Tensors are
    stacked (a new first dim); Python floats become a float64 tensor, ints an int64
    tensor, bools a bool tensor; numpy arrays and numpy scalars are stacked as tensors
    of their dtype; strings are kept as a list; dicts, tuples, named tuples and lists
    are collated element by element. TypeError for anything else or for samples of
    different structure."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch), 0)
    if isinstance(first, (_np.ndarray, _np.generic)) and not isinstance(first, (_np.str_, _np.bytes_)):
        return tensor(_np.stack([_np.asarray(b) for b in batch]))
    if isinstance(first, bool):
        return tensor(list(batch), dtype=_C.dtype.bool)
    if isinstance(first, numbers.Integral):
        return tensor(list(batch), dtype=_C.dtype.int64)
    if isinstance(first, float):
        return tensor(list(batch), dtype=_C.dtype.float64)
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, collections.abc.Mapping):
        collated = {k: default_collate([b[k] for b in batch]) for k in first}
        try:
            return collated if type(first) is dict else type(first)(collated)
        except TypeError:  # a mapping type that cannot be built from a dict
            return collated
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        if any(len(b) != len(first) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        cols = [default_collate(list(s)) for s in zip(*batch)]
        return tuple(cols) if isinstance(first, tuple) else cols
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(first).__name__}")


class DataLoader:
    """torch.utils.data.DataLoader(dataset, batch_size=1, shuffle=False, sampler=None,
    batch_sampler=None, num_workers=0, collate_fn=None, pin_memory=False, drop_last=False,
    generator=None, ...): iterates batches collated by collate_fn (default_collate;
    with batch_size=None, single samples untouched). Single process: num_workers > 0
    runs in the main process too (the batches are the same). Iterable datasets are
    batched in order. `generator` seeds the shuffle (see the module doc). ValueError
    for shuffle with a sampler, or batch_sampler with batch_size/shuffle/sampler/
    drop_last."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device=""):
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.num_workers, self.pin_memory, self.generator = num_workers, pin_memory, generator
        self._iterable = isinstance(dataset, IterableDataset)
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, "
                             "sampler, and drop_last")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if self._iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: shuffle, sampler and batch_sampler "
                             "are not allowed")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_sampler is None and batch_size is not None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_size is not None or batch_sampler is not None else (lambda x: x))

    def __iter__(self):
        if self._iterable:
            yield from self._iter_iterable()
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])

    def _iter_iterable(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
