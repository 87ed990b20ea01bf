"""kiln.nn: modules, parameters, functional, init and utils, as torch.nn."""
from .parameter import Parameter, Buffer  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import Module  # noqa: F401
from . import functional, init, utils  # noqa: F401
from ._linear_cross_entropy import LinearCrossEntropyOptions  # noqa: F401,E402
from . import attention  # noqa: F401,E402
from . import parallel  # noqa: F401,E402  (torch.nn.parallel: DistributedDataParallel)
