"""Speed-ups applied to a loaded model, and the order the encoder tries them in.

Each is checked against the eager model and undone on a mismatch (verify.py). The order matters:
the model's own kernels are changed first, so the forward's measured cost is theirs; then how
calls run, once batches are planned: fp16 weights serve the small calls of that plan, and CUDA
graphs come last because a graph replays the kernels its capture saw.
"""

from .base import Encoder, SpeedUp
from .compiled_layers import CompiledLayers
from .cuda_graphs import CudaGraphs
from .fp16_weights import Fp16Weights
from .fused_norms import FusedNorms
from .fused_rotary import FusedRotary

# Before the forward's cost is measured: they change it.
MODEL_SPEED_UPS: tuple[SpeedUp, ...] = (FusedNorms(), FusedRotary(), CompiledLayers())
# After the batch plan and the pack width are settled: they depend on both.
CALL_SPEED_UPS: tuple[SpeedUp, ...] = (Fp16Weights(), CudaGraphs())

__all__ = [
    "CALL_SPEED_UPS",
    "MODEL_SPEED_UPS",
    "CompiledLayers",
    "CudaGraphs",
    "Encoder",
    "Fp16Weights",
    "FusedNorms",
    "FusedRotary",
    "SpeedUp",
]
