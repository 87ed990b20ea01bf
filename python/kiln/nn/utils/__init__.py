"""kiln.nn.utils: gradient clipping, parameter/vector conversion, sequence padding (rnn),
batch norm folding (fusion), weight / spectral normalisation (hook form and parametrizations),
parametrize, prune, stateless.functional_call, skip_init, weight memory formats."""
from .clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_,  # noqa: F401
                        clip_grads_with_norm_, get_total_norm)
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from . import fusion, rnn  # noqa: F401,E402
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa
                     fuse_linear_bn_weights)
from . import init, memory_format, parametrizations, parametrize, prune, stateless  # noqa: F401
from .init import skip_init  # noqa: F401
from .memory_format import (convert_conv2d_weight_memory_format,  # noqa: F401
                            convert_conv3d_weight_memory_format)
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401
