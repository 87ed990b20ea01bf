"""kiln.nn.utils: gradient clipping, parameter/vector conversion, sequence padding (rnn),
batch norm folding (fusion)."""
from .clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from . import fusion, rnn  # noqa: F401,E402
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa
                     fuse_linear_bn_weights)
