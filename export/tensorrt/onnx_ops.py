"""What each TensorRT target's ONNX parser accepts: opset range and operators (for ``pairedge check``).

Sources: NVIDIA's ONNX opset guide (TensorRT 11.x: ONNX 1.20, opsets 9 to 25), the TensorRT 10.x support
matrices and onnx-tensorrt's ``operators.md``. The 10.x maximum opsets are the ONNX releases those parsers
were built with; a newer opset is reported as a warning (the parser may still accept the model when the
operators it uses did not change), an unknown or unsupported operator as an error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """A TensorRT ONNX parser.

    Attributes:
        name: the ``--target`` value.
        min_opset, max_opset: ai.onnx opsets it is documented for.
        extra_ops: operators this target accepts beyond :data:`SUPPORTED_10_3`.
    """

    name: str
    min_opset: int
    max_opset: int
    extra_ops: frozenset[str] = frozenset()


#: Operators of the default (ai.onnx) domain the TensorRT 10.3 parser imports (onnx-tensorrt operators.md).
SUPPORTED_10_3: frozenset[str] = frozenset(
    """
    Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh AveragePool BatchNormalization Bernoulli
    BitwiseAnd BitwiseNot BitwiseOr BitwiseXor BlackmanWindow Cast CastLike Ceil Celu Clip Compress Concat
    Constant ConstantOfShape Conv ConvTranspose Cos Cosh CumSum DFT DepthToSpace DequantizeLinear Div Dropout
    Einsum Elu Equal Erf Exp Expand EyeLike Flatten Floor GRU Gather GatherElements GatherND Gelu Gemm
    GlobalAveragePool GlobalLpPool GlobalMaxPool Greater GreaterOrEqual GridSample GroupNormalization
    HammingWindow HannWindow HardSigmoid HardSwish Hardmax Identity If InstanceNormalization IsInf IsNaN LRN
    LSTM LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax Loop LpNormalization LpPool MatMul Max
    MaxPool MaxRoiPool Mean MeanVarianceNormalization Min Mish Mod Mul Multinomial Neg NonMaxSuppression
    NonZero Not OneHot Or PRelu Pad ParametricSoftplus Pow QuantizeLinear RNN RandomNormal RandomNormalLike
    RandomUniform RandomUniformLike Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax
    ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize ReverseSequence RoiAlign
    Round STFT ScaledTanh Scan Scatter ScatterElements ScatterND Selu Shape Shrink Sigmoid Sign Sin Sinh Size
    Slice Sub Softmax Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sum Tan Tanh ThresholdedRelu Tile TopK
    Transpose Trilu Unique Unsqueeze Upsample Where Xor
    """.split()
)

#: Operators the TensorRT parsers reject (integer-arithmetic quantized ops, sequences, strings, ...).
UNSUPPORTED: frozenset[str] = frozenset(
    """
    BitShift ConvInteger MatMulInteger QLinearConv QLinearMatMul DynamicQuantizeLinear Det StringNormalizer
    TfIdfVectorizer Optional OptionalGetElement OptionalHasElement SequenceAt SequenceConstruct SequenceEmpty
    SequenceErase SequenceInsert SequenceLength SequenceMap SplitToSequence ConcatFromSequence RegexFullMatch
    StringConcat StringSplit ImageDecoder Col2Im CenterCropPad
    """.split()
)

TARGETS: dict[str, Target] = {
    "tensorrt-10.3": Target("tensorrt-10.3", 9, 20),
    "tensorrt-10.13": Target("tensorrt-10.13", 9, 22, frozenset({"AffineGrid", "RMSNormalization"})),
    "tensorrt-11": Target("tensorrt-11", 9, 25, frozenset({"AffineGrid", "RMSNormalization", "Attention"})),
}
DEFAULT_TARGET = "tensorrt-10.3"


def supported(target: Target, op_type: str) -> bool:
    return op_type in SUPPORTED_10_3 or op_type in target.extra_ops


def target_for(major: int, minor: int) -> str:
    """The closest documented target of an installed TensorRT version (``pairedge build``'s default)."""
    if major >= 11:
        return "tensorrt-11"
    return "tensorrt-10.13" if (major, minor) >= (10, 13) else DEFAULT_TARGET
