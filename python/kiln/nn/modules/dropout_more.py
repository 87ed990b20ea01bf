"""AlphaDropout, FeatureAlphaDropout and ChannelShuffle modules, as torch.nn's; decision
0079."""
from .. import functional as F
from .module import Module

__all__ = ["AlphaDropout", "FeatureAlphaDropout", "ChannelShuffle"]


class _AlphaDropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class AlphaDropout(_AlphaDropoutNd):
    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_AlphaDropoutNd):
    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def extra_repr(self):
        return f"groups={self.groups}"

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)
