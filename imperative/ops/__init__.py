"""Op definitions. Each op is an immutable value with `infer` (shapes, dtypes, devices
from input descriptions, no data) separate from its numpy `kernel`."""
from .base import Op, cached_op
from .elemwise import Elemwise
from .matmul import BatchedMatrixMul, MatrixMul
from .misc import Copy, TypeCvt
from .reduce import Argmax, Argmin, Reduce
from .indexing import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .rng import *  # noqa: F401,F403
from .tensor_ops import *  # noqa: F401,F403
from .shape import (AddAxis, Broadcast, Dimshuffle, FastpathCopy, GetVarShape, Identity,
                    RemoveAxis, Reshape, Subtensor)

__all__ = ["Op", "Elemwise", "Reduce", "Argmax", "Argmin", "MatrixMul", "BatchedMatrixMul",
           "Reshape", "Broadcast", "Dimshuffle", "AddAxis", "RemoveAxis", "GetVarShape",
           "Identity", "FastpathCopy", "Subtensor", "TypeCvt", "Copy"]
__all__ += indexing.__all__ + nn.__all__ + rng.__all__ + tensor_ops.__all__  # noqa: F405
