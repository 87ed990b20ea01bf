"""kiln.optim: optimizers and learning-rate schedulers with torch.optim's API and update
formulas (written in Python over kiln's in-place tensor ops, under no_grad)."""
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from . import lr_scheduler  # noqa: F401
