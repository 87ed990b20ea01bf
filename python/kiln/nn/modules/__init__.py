from .module import Module  # noqa: F401
from .linear import Identity, Linear, Bilinear, Flatten, Unflatten  # noqa: F401
from .activation import (ReLU, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, Softmax,  # noqa: F401
                         LogSoftmax, Softplus)
from .normalization import (LayerNorm, RMSNorm, GroupNorm, BatchNorm1d,  # noqa: F401
                            BatchNorm2d, BatchNorm3d, Embedding, Dropout)
from . import activation_more, instancenorm, padding, rnn, shape_layers
from .activation_more import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .shape_layers import *  # noqa: F401,F403
from .container import Sequential, ModuleList, ModuleDict, ParameterList  # noqa: F401
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,  # noqa: F401
                   ConvTranspose3d)
from .pooling import (MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d,  # noqa: F401
                      AvgPool3d, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d,
                      AdaptiveMaxPool1d, AdaptiveMaxPool2d)
from .attention import MultiheadAttention  # noqa: F401
from .upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d  # noqa: F401
from .transformer import (TransformerEncoderLayer, TransformerEncoder,  # noqa: F401
                          TransformerDecoderLayer, TransformerDecoder, Transformer)
from .loss import (L1Loss, MSELoss, SmoothL1Loss, HuberLoss, NLLLoss,  # noqa: F401
                   CrossEntropyLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss)
from . import loss as _loss
from .loss import *  # noqa: F401,F403

__all__ = ["Module", "Identity", "Linear", "Bilinear", "Flatten", "Unflatten", "ReLU",
           "LeakyReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Softplus",
           "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "Embedding",
           "Dropout", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "L1Loss",
           "MSELoss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
           "BCEWithLogitsLoss", "KLDivLoss", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
           "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
           "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "BatchNorm3d", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]
__all__ += [n for n in _loss.__all__ if n not in __all__]
__all__ += (activation_more.__all__ + instancenorm.__all__ + padding.__all__ + rnn.__all__ +
            shape_layers.__all__)
from . import dropout_more, loss_more, pooling_more, sparse_more  # decision 0079
from .dropout_more import *  # noqa: F401,F403
from .loss_more import *  # noqa: F401,F403
from .pooling_more import *  # noqa: F401,F403
from .sparse_more import *  # noqa: F401,F403
__all__ += (dropout_more.__all__ + loss_more.__all__ + pooling_more.__all__ +
            sparse_more.__all__)
from . import lazy  # noqa: E402
from .container import ParameterDict  # noqa: F401,E402
from .lazy import *  # noqa: F401,F403,E402
__all__ += ["ParameterDict"] + lazy.__all__
from . import adaptive, fractional, parallel  # noqa: E402
from .adaptive import *  # noqa: F401,F403,E402
from .fractional import *  # noqa: F401,F403,E402
from .parallel import *  # noqa: F401,F403,E402
__all__ += adaptive.__all__ + fractional.__all__ + parallel.__all__
from . import linear_cross_entropy as _lce  # noqa: E402
from .linear_cross_entropy import LinearCrossEntropyLoss  # noqa: F401,E402
__all__ += _lce.__all__
