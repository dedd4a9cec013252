"""The neural-network ops by name, from their family modules: conv.py, pool.py, softmax.py,
norm.py, and Embedding (indexing.py) and LeakyRelu (elemwise.py).

Each is ONE op with a vectorised numpy kernel (so that autodiff can give each a single
backward rule). They are float-only functions: integer and bool inputs compute in float32,
float16 inputs compute in float32 and round once at the end (numpy has no float16 BLAS,
and float16 sums lose too much).
"""
from .conv import Convolution, ConvolutionBackwardData, ConvolutionBackwardFilter
from .elemwise import LeakyRelu
from .indexing import Embedding
from .norm import BatchNormForward, LayerNormForward
from .pool import Pooling
from .softmax import CrossEntropy, LogSoftmax, Softmax

__all__ = ["Convolution", "ConvolutionBackwardData", "ConvolutionBackwardFilter", "Pooling",
           "Softmax", "LogSoftmax", "CrossEntropy", "BatchNormForward", "LayerNormForward",
           "Embedding", "LeakyRelu"]
