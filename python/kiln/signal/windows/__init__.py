"""kiln.signal.windows: the window functions of torch.signal.windows (SciPy's definitions).
Each takes the length M and keyword arguments sym (True: symmetric, for filter design;
False: periodic, for spectral analysis), dtype (float32 or float64, default the default
dtype), layout (strided only), device and requires_grad."""
from ._bartlett import bartlett
from ._cosine import cosine
from ._exponential import exponential
from ._gaussian import gaussian
from ._general_cosine import general_cosine, general_hamming
from ._kaiser import kaiser
from ._named_cosine_sums import blackman, hamming, hann, nuttall

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]
