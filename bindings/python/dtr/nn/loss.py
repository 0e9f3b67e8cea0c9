"""torch.nn's loss modules over dtr.nn.functional: forward(input, target) returns
the loss reduced as `reduction` says ("mean", "sum" or "none"; ValueError
otherwise). A class `weight` is registered as a buffer, as in PyTorch."""
from . import Module
from . import functional as F

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
           "BCELoss", "BCEWithLogitsLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        F._unsupported(type(self).__name__, size_average=size_average, reduce=reduce)
        F._check_reduction(reduction)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """torch.nn.CrossEntropyLoss(weight=None, ignore_index=-100, reduction="mean",
    label_smoothing=0.0): logits (N, C) with class-index (N) or probability (N, C)
    targets (and (N, C, d...) / (N, d...)); see F.cross_entropy."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """torch.nn.NLLLoss(weight=None, ignore_index=-100, reduction="mean"): log-probabilities
    (N, C) and class indices (N); see F.nll_loss."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """torch.nn.MSELoss: (input - target)^2, reduced (dtr's mse_loss row)."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """torch.nn.L1Loss: |input - target|, reduced."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """torch.nn.SmoothL1Loss(reduction="mean", beta=1.0); see F.smooth_l1_loss."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """torch.nn.HuberLoss(reduction="mean", delta=1.0); see F.huber_loss."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """torch.nn.BCELoss(weight=None, reduction="mean"): probabilities and targets of one
    shape; see F.binary_cross_entropy."""

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """torch.nn.BCEWithLogitsLoss(weight=None, reduction="mean", pos_weight=None): logits
    and targets of one shape; see F.binary_cross_entropy_with_logits."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(weight, size_average, reduce, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
