"""Op definitions. Each op is an immutable value with `infer` (shapes, dtypes, devices
from input descriptions, no data) separate from its numpy `kernel`.

The vocabulary, one module per family:

  base.py       Op, cached_op and the helpers every op uses
  elemwise.py   Elemwise (one table of modes), ActivationGrad, ScaledAdd, LeakyRelu
  reduce.py     Reduce, Argmax, Argmin
  matmul.py     MatrixMul, BatchedMatrixMul
  shape.py      Reshape, Broadcast, Dimshuffle, AddAxis, RemoveAxis, GetVarShape, Identity,
                FastpathCopy, Subtensor, Concat, Split
  indexing.py   the indexing ops, Embedding, and the parsing of a user's index
  select.py     Where, Clip
  sort.py       Argsort (stable; F.sort, F.argsort, F.topk)
  scan.py       Cumulative (cumsum, cumprod), CumprodGrad
  creation.py   Fill, Arange, Linspace
  convert.py    TypeCvt, Copy
  rng.py        the random-number ops
  optim.py      AdamStep (an optimizer's update as one op)
  conv.py, pool.py, softmax.py, norm.py   the neural-network ops (nn.py lists them;
                nn_common.py holds what they share)

Kernels run on numpy or, below the ops, on the native kernels (imperative/backend/).
"""
from .base import Op
from .conv import Convolution, ConvolutionBackwardData, ConvolutionBackwardFilter
from .convert import Copy, TypeCvt
from .creation import Arange, Fill, Linspace
from .elemwise import Elemwise, LeakyRelu
from .indexing import (Embedding, IndexingMultiAxisVec, IndexingSetMultiAxisVec,
                       MaskedIndexingMultiAxisVec, SetSubtensor)
from .matmul import BatchedMatrixMul, MatrixMul
from .norm import BatchNormForward, LayerNormForward
from .pool import Pooling
from .reduce import Argmax, Argmin, Reduce
from .rng import (DropoutBitsRNG, DropoutMaskRNG, GaussianRNG, PermutationRNG, RandIntRNG,
                  ShuffleRNG, UniformRNG)
from .scan import Cumulative, CumprodGrad
from .select import Clip, Where
from .shape import (AddAxis, Broadcast, Concat, Dimshuffle, FastpathCopy, GetVarShape, Identity,
                    RemoveAxis, Reshape, Split, Subtensor)
from .softmax import CrossEntropy, LogSoftmax, Softmax
from .sort import Argsort
from . import nn  # noqa: F401  (imperative.ops.nn: the neural-network ops by name)

__all__ = [
    "Op",
    # elementwise, reductions, products
    "Elemwise", "Reduce", "Argmax", "Argmin", "MatrixMul", "BatchedMatrixMul",
    # shapes
    "Reshape", "Broadcast", "Dimshuffle", "AddAxis", "RemoveAxis", "GetVarShape", "Identity",
    "FastpathCopy", "Subtensor", "Concat", "Split",
    # conversion, selection, creation
    "TypeCvt", "Copy", "Where", "Clip", "Fill", "Arange", "Linspace",
    # sorting and scans
    "Argsort", "Cumulative", "CumprodGrad",
    # indexing
    "IndexingMultiAxisVec", "MaskedIndexingMultiAxisVec", "SetSubtensor",
    "IndexingSetMultiAxisVec",
    # neural networks
    "Convolution", "ConvolutionBackwardData", "ConvolutionBackwardFilter", "Pooling", "Softmax",
    "LogSoftmax", "CrossEntropy", "BatchNormForward", "LayerNormForward", "Embedding",
    "LeakyRelu",
    # random numbers
    "GaussianRNG", "UniformRNG", "RandIntRNG", "PermutationRNG", "ShuffleRNG", "DropoutMaskRNG",
    "DropoutBitsRNG",
]
