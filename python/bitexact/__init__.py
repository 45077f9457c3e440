"""bitexact: narrow floating-point arithmetic bit for bit, its roundings traced,
and models of NVIDIA GPU arithmetic, over NumPy arrays of bit patterns.

Values travel as arrays of bit patterns: uint16 for bf16 and fp16, uint32 for
fp32 and tf32 (tf32's 19 bits in the low bits), uint8 for e5m2 and e4m3.
Signed integers of the same width are read as the same bits (so that
``tensor.view(torch.int16).numpy()`` needs no copy), fp32 operands may also be
float32 arrays, and CPU PyTorch tensors of a matching dtype are viewed without
a copy. Results are always unsigned arrays.

    out, raised = bitexact.add(a, b, format="bf16", rounding="nearest_even")

docs/python.md has the tour and the mapping to the C++ API.
"""

import enum
import functools
import json
import os

import numpy as np

# An installed package (pip install .) carries the MUFU tables in bitexact/data;
# the library reads them from $BITEXACT_DATA_DIR when set, else from the folder
# it was compiled with (the source tree's data/, for the CMake build).
_PACKAGE_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
if os.path.isdir(_PACKAGE_DATA) and not os.environ.get("BITEXACT_DATA_DIR"):
    os.environ["BITEXACT_DATA_DIR"] = _PACKAGE_DATA

from . import _bitexact  # noqa: E402

__all__ = [
    "Flags", "Value", "Trace", "value", "describe", "format_info", "storage_dtype", "as_bits",
    "from_float32", "to_float32", "from_torch", "to_torch", "cuda_env",
    "add", "sub", "mul", "div", "fma", "sqrt", "convert", "equal", "less", "less_equal",
    "trace", "mma", "mma_trace", "wgmma", "ex2_approx", "rcp_approx", "lg2_approx", "cvt",
    "attention", "attention_backward", "attention_row", "ATTENTION_PRESETS", "list_kernels", "kernel_description",
    "repeated_max", "repeated_max_torch", "p_bar_one_range",
]


class Flags(enum.IntFlag):
    """IEEE 754 exception flags, with TestFloat's (and the C++ flags struct's) bit values."""

    NONE = 0
    INEXACT = 1
    UNDERFLOW = 2
    OVERFLOW = 4
    DIVIDE_BY_ZERO = 8
    INVALID = 16


# ---------------------------------------------------------------- options

# What each keyword option of the public functions takes, by name: checked before the extension is called,
# whose own refusal of a wrong type (pybind11's) prints its whole signature.
_OPTION_KINDS = {
    "rounding": ("a mode name (str), e.g. 'nearest_even'", (str,)),
    "tininess": ("a tininess name (str), e.g. 'after_rounding'", (str,)),
    "nans": ("a NaN policy name (str), e.g. 'ieee_propagate'", (str,)),
    "ftz": ("True or False", (bool, np.bool_)),
    "daz": ("True or False", (bool, np.bool_)),
    "causal": ("True or False", (bool, np.bool_)),
    "autocast": ("True or False", (bool, np.bool_)),
    "scale": ("a number", (int, float, np.integer, np.floating)),
    "beta": ("a number", (int, float, np.integer, np.floating)),
    "eps": ("a number", (int, float, np.integer, np.floating)),
    "splits": ("an integer", (int, np.integer)),
    "threads": ("an integer (0 for one thread per core)", (int, np.integer)),
    "gpu": ("a GPU name (str)", (str,)),
    "preset": ("a preset name (str)", (str,)),
    "style": ("a style name (str): text, markdown, latex or json", (str,)),
}


# The options whose default is None (the library's choice).
_OPTIONAL = ("scale", "beta", "eps", "splits", "gpu", "preset")


def _check_options(function, **options):
    """TypeError in one line for an option of the wrong type (None passes where the default is None)."""
    for name, given in options.items():
        if given is None and name in _OPTIONAL:
            continue
        what, types = _OPTION_KINDS[name]
        number = types[0] in (int, float)
        if not isinstance(given, types) or (number and isinstance(given, (bool, np.bool_))):
            raise TypeError(f"{function}: {name} is {what}, not {given!r}")


# ---------------------------------------------------------------- formats

_STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32}


@functools.lru_cache(maxsize=None)
def format_info(name):
    """(canonical name, width in bits, exponent bits, fraction bits, storage bytes) of a format name."""
    if not isinstance(name, str):
        raise TypeError(f"a format is named by a string (fp32, bf16, fp16, tf32, e5m2, e4m3), not {name!r}")
    return _bitexact._format_info(name)


def storage_dtype(format):
    """The NumPy dtype that holds the bit patterns of format (uint8, uint16 or uint32)."""
    return np.dtype(_STORAGE[format_info(format)[4]])


# PyTorch's floating dtypes by name (looked up on the tensor, so that torch is never imported here).
_TORCH_FORMATS = {
    "torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32",
    "torch.float8_e5m2": "e5m2", "torch.float8_e4m3fn": "e4m3",
}
_TORCH_INTEGERS = {1: "uint8", 2: "int16", 4: "int32"}

# NumPy's floating dtypes by name, with ml_dtypes' (JAX's bfloat16 and float8 arrays): an array of
# one of these carries its format, and is read as its bit patterns without a copy.
_NUMPY_FORMATS = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e5m2": "e5m2", "float8_e4m3fn": "e4m3",
}


def _carried_format(x):
    """The format an operand's dtype names (a PyTorch tensor, a NumPy or ml_dtypes array), or None."""
    if _is_torch_tensor(x):
        return _TORCH_FORMATS.get(str(x.dtype))
    if isinstance(x, np.ndarray):
        return _NUMPY_FORMATS.get(x.dtype.name)
    return None


def _is_torch_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "view")


def from_torch(tensor, format=None):
    """(bit-pattern array, format) of a PyTorch tensor.

    A contiguous CPU tensor is viewed, not copied: ``tensor.view(torch.int16)``
    (int32 for fp32, uint8 for fp8) and then ``.numpy()``, which shares its
    memory. A GPU tensor is copied to the host first, a non-contiguous one made
    contiguous. An integer tensor (a view made by the caller) needs format=.
    """
    import torch  # only reached with a tensor in hand

    dtype = str(tensor.dtype)
    if dtype in _TORCH_FORMATS:
        own = _TORCH_FORMATS[dtype]
        if format is not None and format_info(format)[0] != own:
            raise ValueError(f"the tensor is {dtype} ({own}), but format={format!r} was asked for")
        format = own
    elif format is None:
        raise ValueError(f"a {dtype} tensor holds bit patterns of no known format: pass format=")
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    width = format_info(format)[4]
    if tensor.element_size() != width:
        raise ValueError(f"a {format} tensor has {width}-byte elements; this {dtype} tensor has {tensor.element_size()}")
    if tensor.dtype.is_floating_point:
        tensor = tensor.view(getattr(torch, _TORCH_INTEGERS[width]))
    return tensor.numpy().view(_STORAGE[width]), format


def to_torch(bits, format):
    """A PyTorch tensor of format's dtype sharing the memory of a bit-pattern array (tf32: float32 after widening)."""
    import torch

    name = format_info(format)[0]
    array = as_bits(bits, name)
    if name == "tf32":
        array = as_bits(convert(array, format="tf32", result_format="fp32")[0], "fp32")
        name = "fp32"
    dtype = {v: k for k, v in _TORCH_FORMATS.items()}[name].split(".")[1]
    signed = array.view({1: np.uint8, 2: np.int16, 4: np.int32}[array.itemsize])
    return torch.from_numpy(np.ascontiguousarray(signed)).view(getattr(torch, dtype))


def _native(x):
    """x in the machine's byte order: a big-endian ('>u2', '>f4') array becomes a copy holding the same numbers
    (not other bits), so that dtype checks and the extension see the numbers the caller meant."""
    return x.astype(x.dtype.newbyteorder("=")) if not x.dtype.isnative else x


def as_bits(x, format, name="x"):
    """x as an unsigned array of format's bit patterns, without a copy where the memory allows.

    Accepts an array of format's storage width (signed or unsigned integers), an
    array whose dtype is the format itself (float32, float16, or ml_dtypes'
    bfloat16, float8_e5m2, float8_e4m3fn), a PyTorch tensor, a Value, or Python
    integers. Raises TypeError or ValueError saying what was expected.
    """
    canonical, width_bits, _, _, width = format_info(format)
    storage = _STORAGE[width]
    if isinstance(x, Value):
        if x.format != canonical:
            raise ValueError(f"{name}: a {x.format} value where {canonical} was expected")
        return np.asarray(x.bits, dtype=storage)
    if _is_torch_tensor(x):
        return from_torch(x, canonical)[0]
    if not isinstance(x, np.ndarray):
        if isinstance(x, (float, np.floating)) or (isinstance(x, (list, tuple)) and any(isinstance(e, float) for e in x)):
            raise TypeError(f"{name}: expected bit patterns of {canonical}, got Python floats; "
                            f"use bitexact.from_float32(np.float32(...), {canonical!r}) or bitexact.value()")
        x = np.asarray(x)
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected bit patterns of {canonical} ({np.dtype(storage).name}), got {x.dtype}")
        if x.size and (x.min() < 0 or x.max() >= 1 << width_bits):
            raise ValueError(f"{name}: a {canonical} bit pattern lies in [0, 2^{width_bits})")
        return x.astype(storage)
    x = _native(x)
    if _NUMPY_FORMATS.get(x.dtype.name) == canonical:
        return x.view(storage)
    if x.dtype.kind not in "iu" or x.dtype.itemsize != width:
        own = [dtype for dtype, f in _NUMPY_FORMATS.items() if f == canonical]
        hint = f" (or {own[0]})" if own else ""
        raise TypeError(f"{name}: expected an array of {canonical} bit patterns, dtype {np.dtype(storage).name}"
                        f"{hint}, got {x.dtype}")
    bits = x.view(storage) if x.dtype != storage else x
    if width_bits < 8 * width and bits.size and int(bits.max()) >> width_bits:
        raise ValueError(f"{name}: a {canonical} bit pattern has {width_bits} bits, but some elements set bits above "
                         f"them (tf32 holds its 19 bits in the low bits; the GPU's fp32-shaped tf32 is "
                         f"convert(x, format='fp32', result_format='tf32', rounding='toward_zero'))")
    return bits


# ---------------------------------------------------------------- values

class Value:
    """One value of a format, held as its bit pattern; repr shows format, bits and decimal value."""

    __slots__ = ("format", "bits")

    def __init__(self, bits, format):
        canonical, width_bits = format_info(format)[:2]
        bits = int(bits)
        if not 0 <= bits < 1 << width_bits:
            raise ValueError(f"a {canonical} bit pattern lies in [0, 2^{width_bits}), not {bits:#x}")
        self.format = canonical
        self.bits = bits

    def __repr__(self):
        return _bitexact._describe(self.format, [self.bits])[0]

    def __float__(self):
        return float(to_float32(np.array([self.bits], dtype=storage_dtype(self.format)), self.format)[0])

    def __eq__(self, other):  # bit equality, as in C++
        return isinstance(other, Value) and (self.format, self.bits) == (other.format, other.bits)

    def __hash__(self):
        return hash((self.format, self.bits))


def value(x, format=None):
    """A Value from its bits (an int, with format=), from text in the `bitexact trace` operand
    syntax ("bf16:0xC013", "-2.40625", "0x1.8p-3", "inf"; format= sets unprefixed ones, default fp32),
    or from a Python float. Text or a float that the format cannot hold exactly is refused."""
    if isinstance(x, Value):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if format is None:
            raise ValueError("a bit pattern needs its format: value(0x3F80, 'bf16')")
        return Value(x, format)
    if isinstance(x, (float, np.floating)):
        x = float(x).hex() if np.isfinite(x) else repr(float(x))
    if not isinstance(x, str):
        raise TypeError(f"value() takes bits (int), text or a float, not {type(x).__name__}")
    bits, parsed_format, exact = _bitexact._parse_operand(x, format_info(format or "fp32")[0])
    if not exact:
        nearest = _bitexact._describe(parsed_format, [bits])[0]
        raise ValueError(f"{x!r} is not exactly representable in {parsed_format}; the nearest is {nearest}")
    return Value(bits, parsed_format)


def describe(bits, format, limit=20):
    """The elements of a bit-pattern array, one line each ("bf16:0xC097 (-4.71875)"), at most limit of them."""
    flat = as_bits(bits, format, "bits").reshape(-1)
    lines = _bitexact._describe(format_info(format)[0], flat[:limit].tolist())
    if flat.size > limit:
        lines.append(f"... ({flat.size - limit} more)")
    return "\n".join(lines)


# ---------------------------------------------------------------- elementwise operations

def cuda_env(rounding="nearest_even", ftz=False):
    """The environment keywords of a CUDA scalar instruction (.rn/.rz/.rm/.rp, .ftz), as ptx::gpu_environment."""
    return dict(rounding=rounding, tininess="after_rounding", ftz=ftz, daz=ftz, nans="canonical")


def _operand_formats(format, arity, op, operands=()):
    if format is None:
        carried = [_carried_format(x) for x in operands]
        if operands and all(carried):
            return tuple(carried)
        raise ValueError(f"{op}: name the operands' format, e.g. format='bf16' (uint16 could be bf16 or fp16); "
                         f"only arrays whose dtype is a format (bfloat16, float16, ...) carry their own")
    formats = (format,) * arity if isinstance(format, str) else tuple(format)
    if len(formats) != arity:
        raise ValueError(f"{op}: format= is one name or {arity} of them, one per operand; got {format!r}")
    return tuple(format_info(f)[0] for f in formats)


def _result_format(formats, result_format, op, ask="name the result with result_format="):
    # The library's rule (core/dispatch.hpp's result_format_of), as the command applies it to --to.
    try:
        result = _bitexact._result_format(list(formats), result_format)
    except ValueError as error:  # a pair that cannot be mixed: asking for result_format= would not help
        raise ValueError(f"{op}: {error}") from None
    if result is None:
        raise ValueError(f"{op}: the operands are {' and '.join(formats)}; {ask}")
    return result


def _elementwise(op, operands, format, result_format=None, rounding="nearest_even", tininess="after_rounding",
                 ftz=False, daz=False, nans="ieee_propagate", random_bits=None, element_flags=False):
    _check_options(op, rounding=rounding, tininess=tininess, nans=nans)
    formats = _operand_formats(format, len(operands), op, operands)
    names = "abc"
    arrays = [as_bits(x, f, names[i]) for i, (x, f) in enumerate(zip(operands, formats))]
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ValueError(f"{op}: operand shapes {' and '.join(str(a.shape) for a in arrays)} do not broadcast") from None
    # A view when the shapes agree and the memory is contiguous; a copy only to broadcast or to compact.
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1) for a in arrays]
    for flag, given in (("ftz", ftz), ("daz", daz), ("element_flags", element_flags)):
        if not isinstance(given, (bool, np.bool_)):
            raise TypeError(f"{op}: {flag} is True or False, not {given!r}")
    if random_bits is not None:
        random_bits = _native(np.asarray(random_bits))
        if random_bits.dtype != np.uint32:
            raise TypeError(f"{op}: random_bits must be a uint32 array (one draw per element), got {random_bits.dtype}")
        try:
            random_bits = np.ascontiguousarray(np.broadcast_to(random_bits, shape)).reshape(-1)
        except ValueError:
            raise ValueError(f"{op}: random_bits has shape {random_bits.shape}; it needs one draw per element of the "
                             f"result, shape {shape} (or a shape that broadcasts to it)") from None
    result = "fp32" if op in _PREDICATES else _result_format(formats, result_format, op)
    out, raised, each = _bitexact._elementwise(op, flat, list(formats), result, rounding, tininess, ftz, daz, nans,
                                               random_bits, element_flags)
    out = out.reshape(shape)
    if element_flags:
        return out, Flags(raised), each.reshape(shape)
    return out, Flags(raised)


_PREDICATES = ("equal", "less", "less_equal", "equal_signaling", "less_quiet", "less_equal_quiet")

# The rounding modes by the library's one table of names (core/names.hpp), so that a new mode
# reaches this text without an edit here; the test of the docstring checks the other names.
_ENVIRONMENT_DOC = """
    format: the operands' format name, or one name per operand (mixes pair an fp32
        operand with a narrow one); left out, it comes from the operands' dtypes where each
        names its format (float32, float16, a bfloat16 tensor, an ml_dtypes array);
        result_format: the result's, any format; by default the operands' (a mix names it).
    rounding: """ + ", ".join(names[0] for names in _bitexact._spellings()["rounding"]) + """
        (stochastic reads random_bits: a uint32 array, one draw per element).
    tininess: after_rounding (x86, CUDA) or before_rounding (ARM), also after/before as the
        command spells them; ftz: subnormal results become zero; daz: subnormal operands read
        as zero; nans: ieee_propagate (x86; or ieee) or canonical (CUDA's one NaN; or cuda).
        cuda_env() gives the keywords of a CUDA instruction.
    Returns (result, raised), raised the OR of every element's Flags; with
    element_flags=True, (result, raised, flags) with one uint8 of flags per element."""


def _operation(name, arity, doc):
    def run(*operands, format=None, **keywords):
        if len(operands) != arity:
            raise TypeError(f"{name} takes {arity} operand{'s' if arity > 1 else ''}, got {len(operands)}")
        return _elementwise(name, operands, format, **keywords)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc + "\n" + _ENVIRONMENT_DOC
    run.traced_op = name  # bitexact.testing traces a mismatching element through bitexact.trace
    return run


add = _operation("add", 2, "add(a, b, format=...): a + b, each element rounded once.")
sub = _operation("sub", 2, "sub(a, b, format=...): a - b, each element rounded once.")
mul = _operation("mul", 2, "mul(a, b, format=...): a * b, each element rounded once.")
div = _operation("div", 2, "div(a, b, format=...): a / b, each element rounded once.")
fma = _operation("fma", 3, "fma(a, b, c, format=...): a * b + c rounded once (a and b share a format).")
sqrt = _operation("sqrt", 1, "sqrt(a, format=...): the square root, rounded once.")
convert = _operation("convert", 1, "convert(a, format=..., result_format=...): a rounded into result_format.")


def _predicate(name, default_signaling):
    def run(a, b, *, format=None, signaling=default_signaling, daz=False, element_flags=False):
        op = name
        if signaling != default_signaling:
            op = name + ("_signaling" if signaling else "_quiet")
        return _elementwise(op, (a, b), format, daz=daz, element_flags=element_flags)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = (f"{name}(a, b, format=...): the IEEE predicate as a bool array, and the Flags it raised "
                   f"(invalid for a signaling NaN; for any NaN when signaling=True, "
                   f"{'not ' if not default_signaling else ''}the default). "
                   "greater is less with the operands swapped. daz reads subnormals as zero.")
    return run


equal = _predicate("equal", False)
less = _predicate("less", True)
less_equal = _predicate("less_equal", True)


def from_float32(x, format, rounding="nearest_even", **environment):
    """Bit patterns of format from a float32 array, each rounded as convert rounds it (flags dropped)."""
    x = _native(np.asarray(x))
    if x.dtype != np.float32:
        raise TypeError(f"from_float32 takes a float32 array, got {x.dtype}; np.float32(x) rounds doubles to nearest "
                        "even first, which is a rounding of its own")
    return convert(x.view(np.uint32), format="fp32", result_format=format, rounding=rounding, **environment)[0]


def to_float32(bits, format):
    """A float32 array of the values of format's bit patterns: exact for every format
    (each fits in fp32); a signaling NaN comes back quieted, as the conversion makes it."""
    return convert(bits, format=format, result_format="fp32")[0].view(np.float32)


# ---------------------------------------------------------------- traces

class Trace:
    """One operation's trace: .record (the JSON renderer's record as a dict), .text, .markdown, .latex, .json."""

    def __init__(self, render):
        self._render = render

    @functools.cached_property
    def json(self):
        return self._render("json")

    @functools.cached_property
    def record(self):
        return json.loads(self.json)

    @functools.cached_property
    def text(self):
        return self._render("text")

    @functools.cached_property
    def markdown(self):
        return self._render("markdown")

    @functools.cached_property
    def latex(self):
        return self._render("latex")

    def __str__(self):
        return self.text

    def __repr__(self):
        return self.text

    def _repr_markdown_(self):
        return self.markdown


def _operand_bits(x, format, position):
    if isinstance(x, np.ndarray):
        if x.size != 1:
            raise ValueError(f"trace: operand {position} is an array of {x.size} elements; trace one element")
        x = x.reshape(-1)[0]
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if format is None:
            raise ValueError(f"trace: operand {position} is a bit pattern; name its format with format=")
        x = Value(int(x), format)
    if not isinstance(x, Value):
        x = value(x, format)
    return x


def trace(op, *operands, format=None, to=None, rounding="nearest_even", tininess="after_rounding", ftz=False,
          daz=False, nans="ieee_propagate", random_bits=0):
    """Trace one operation (add sub mul div fma sqrt convert) as `bitexact trace` does.

    Operands: Values, bit patterns (with format=, one name or one per operand),
    text in the `bitexact trace` syntax ("bf16:0xC013", "-2.40625") or floats
    (format= or fp32 for unprefixed ones; refused when not exact). to: the
    result format (default the operands'; required for convert).
    """
    _check_options("trace", rounding=rounding, tininess=tininess, ftz=ftz, daz=daz, nans=nans)
    formats = (format,) * len(operands) if format is None or isinstance(format, str) else tuple(format)
    if len(formats) != len(operands):
        raise ValueError(f"trace: format= is one name or one per operand; got {format!r}")
    values = [_operand_bits(x, f, i + 1) for i, (x, f) in enumerate(zip(operands, formats))]
    names = [v.format for v in values]
    if to is None and op == "convert":
        raise ValueError("trace convert: name the result format with to=")
    to = _result_format(names, to, f"trace {op}", "name the result format with to=")
    if not isinstance(random_bits, (int, np.integer)) or not 0 <= int(random_bits) < 1 << 32:
        raise ValueError("trace: random_bits is one uint32 (the draw of this one operation)")
    args = (op, [v.bits for v in values], names, to, rounding, tininess, ftz, daz, nans,
            int(random_bits))
    record = Trace(lambda style: _bitexact._trace(*args, style))
    record.text  # renders once now, so that bad arguments raise here and not at first use
    return record


# ---------------------------------------------------------------- hardware models

def _matrix(x, format, name, shape=None):
    bits = as_bits(x, format, name)
    if bits.ndim != 2:
        raise ValueError(f"{name}: expected a matrix (2 dimensions), got shape {bits.shape}")
    if shape is not None and bits.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {bits.shape}")
    return bits


def _mma_operands(a, b, input_format, caller):
    """A [M, K] and B [K, N] as bit-pattern matrices, with M, N and K."""
    a = _matrix(a, input_format, "a")
    b = _matrix(b, input_format, "b")
    m, k = a.shape
    if b.shape[0] != k:
        raise ValueError(f"{caller}: a is {a.shape} and b is {b.shape}; b needs {k} rows")
    return a, b, m, b.shape[1], k


def mma(a, b, c=None, *, input_format="bf16", acc_format="fp32", arch="sm_90"):
    """D = A B + C as the tensor cores compute it, for A [M, K], B [K, N], C [M, N] of any sizes
    (C defaults to +0): each output the unit's chain of fused steps over k (16 products a step on
    sm_90, 8 on sm_80), each step's rounded result the next one's C. Returns D's bits [M, N]."""
    a, b, m, n, k = _mma_operands(a, b, input_format, "mma")
    c = np.zeros((m, n), storage_dtype(acc_format)) if c is None else _matrix(c, acc_format, "c", (m, n))
    d = _bitexact._mma(np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b.T).reshape(-1),
                       np.ascontiguousarray(c).reshape(-1), m, n, k, input_format, acc_format, arch)
    return d.reshape(m, n)


def mma_trace(a, b, c=None, *, row, col, input_format="bf16", acc_format="fp32", arch="sm_90"):
    """The fused steps that compute D[row][col] of mma(a, b, c), each a Trace (terms, e_max,
    truncation, the exact sum and its one rounding), in the order the unit runs them."""
    a, b, m, n, k = _mma_operands(a, b, input_format, "mma_trace")
    if not (0 <= row < m and 0 <= col < n):
        raise ValueError(f"mma_trace: element ({row}, {col}) is outside D's {m} x {n}")
    addend = 0 if c is None else int(_matrix(c, acc_format, "c", (m, n))[row, col])
    a_row, b_col = np.ascontiguousarray(a[row]), np.ascontiguousarray(b[:, col])

    def step(index):
        return Trace(lambda style: _bitexact._mma_element_steps(a_row, b_col, addend, input_format, acc_format,
                                                                arch, style)[index])

    steps = len(_bitexact._mma_element_steps(a_row, b_col, addend, input_format, acc_format, arch, "text"))
    return [step(i) for i in range(steps)]


def wgmma(a, b, c=None, *, input_format="bf16", acc_format="fp32"):
    """wgmma.mma_async m64nNk16 on sm_90: A [64, 16], B [16, N] (N a multiple of 8 up to 256),
    C [64, N] (default +0). Returns D's bits [64, N]."""
    a = _matrix(a, input_format, "a", (64, 16))
    b = _matrix(b, input_format, "b")
    if b.shape[0] != 16:
        raise ValueError(f"wgmma: b must be [16, N], got {b.shape}")
    n = b.shape[1]
    c = np.zeros((64, n), storage_dtype(acc_format)) if c is None else _matrix(c, acc_format, "c", (64, n))
    d = _bitexact._wgmma(np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b.T).reshape(-1),
                         np.ascontiguousarray(c).reshape(-1), n, input_format, acc_format)
    return d.reshape(64, n)


def matmul(a, b, *, preset=None, kernel=None, splits=None, bias=None, c=None, alpha=1.0, beta=None, format="bf16",
           out_format=None, threads=0):
    """D = A B as a GPU kernel computes it, bit for bit: A [M, K], B [K, N] of bf16 or fp16 bits (or torch /
    ml_dtypes arrays of that format); D [M, N] in the same format, or fp32 with out_format="fp32" (torch.mm
    and torch.addmm's out_dtype=torch.float32). format="fp32" takes float32 arrays (or their uint32 bits)
    into fp32 on the tf32 tensor core, as torch.matmul runs them under allow_tf32. Default kernel: cuBLAS's
    sm_90 kernels as torch.matmul, F.linear and torch.addmm run them (preset "cublas_sm90", or
    "cublas_sm90_tf32" for fp32; list_matmul_kernels() names the presets; kernel= takes a description as a
    dict or a .json path, matmul_kernel_description(name) gives one to change).

    Each output is the tensor core's chain of fused steps over K into fp32. splits: the split-K count
    (cuBLAS's numSplitsK in its CUBLASLT_LOG_LEVEL=5 log; default the description's, 1): K cut into that many
    parts of ceil(K / splits) rounded up to the kernel's K tile, their fp32 sums added in split order.
    bias [N] (F.linear's; its B is the weight transposed) is added in fp32; c [M, N] with alpha and beta is
    torch.addmm's alpha and beta x C in fp32 (the description's alpha_beta rules); then one rounding to the output. threads: 0 for every
    core (the bits do not depend on it). docs/matmul.md has the evidence; fp8 products are scaled_matmul's."""
    a, b, m, n, k = _mma_operands(a, b, format, "matmul")
    out_format = format if out_format is None else out_format
    return _gemm(a, b, m, n, k, format, format, out_format, preset, kernel, splits, None, None, alpha, beta, c, bias,
                 threads)


def scaled_matmul(a, b, scale_a, scale_b, *, a_format="e4m3", b_format=None, out_format="bf16", preset=None,
                  kernel=None, splits=None, threads=0):
    """torch._scaled_mm's D = (A B) x scales as cuBLAS's sm_90 fp8 kernels compute it, bit for bit: A [M, K] and
    B [K, N] of e4m3 or e5m2 bits (uint8, or torch / ml_dtypes fp8 arrays; B as b.t() of the column-major
    operand torch takes). Scales, float32: one value (per tensor); scale_a [M] or [M, 1] (per row), scale_b [N]
    or [1, N] (per column); or DeepSeek-style blocks: scale_a [M, ceil(K/128)] (1 x 128) with scale_b
    [ceil(K/128), ceil(N/128)] (128 x 128) or [ceil(K/128), N] (1 x 128).

    preset "cublas_sm90_fp8" (the default, torch's use_fast_accum=False): the fp8 tensor core's chains of
    32-product steps (a 13-bit window, each step rounded toward zero to E8M13) over each 128 of K, added into
    fp32 (block scales enter there); "cublas_sm90_fp8_fast_accum" (use_fast_accum=True): one chain over K. Then
    the sum times fl32(scale_a * scale_b) in fp32 (tensor and row scales) and one rounding to out_format (bf16,
    fp16 or fp32). Returns D's bits [M, N]. docs/matmul.md has the evidence and the rules."""
    b_format = a_format if b_format is None else b_format
    a = _matrix(a, a_format, "a")
    b = _matrix(b, b_format, "b")
    m, k = a.shape
    if b.shape[0] != k:
        raise ValueError(f"scaled_matmul: a is {a.shape} and b is {b.shape}; b needs {k} rows")
    return _gemm(a, b, m, b.shape[1], k, a_format, b_format, out_format, preset, kernel, splits, scale_a, scale_b,
                 1.0, None, None, None, threads)


def _gemm(a, b, m, n, k, a_format, b_format, out_format, preset, kernel, splits, scale_a, scale_b, alpha, beta, c,
          bias, threads, action="run", expected=None, element=(0, 0)):
    """The binding's _gemm; an empty kernel name asks for the default preset of a_format."""
    if preset is not None and kernel is not None:
        raise ValueError("matmul: preset= and kernel= both name the kernel; give one")
    if kernel is not None:
        kernel_text = _kernel_text(kernel)
    else:
        kernel_text = "" if preset is None else str(preset)
    if bias is not None:
        bias = np.ascontiguousarray(as_bits(bias, out_format, "bias"))
        if bias.shape != (n,):
            raise ValueError(f"matmul: bias has shape {bias.shape}; expected ({n},), one value a column of b")
    if c is not None:
        c = np.ascontiguousarray(as_bits(c, out_format, "c"))
        if c.shape != (m, n):
            raise ValueError(f"matmul: c has shape {c.shape}; expected ({m}, {n})")
        c = c.reshape(-1)
        beta = 1.0 if beta is None else beta
    elif beta is not None:
        raise ValueError("matmul: beta multiplies c; give c=")
    scales = []
    for x in (scale_a, scale_b):
        array = None if x is None else np.asarray(x, np.float32)
        scales += [None if array is None else np.ascontiguousarray(array.reshape(-1)),
                   [] if array is None else list(array.shape)]
    if expected is not None:
        expected = np.ascontiguousarray(as_bits(expected, out_format, "expected"))
        if expected.shape != (m, n):
            raise ValueError(f"identify_matmul: expected has shape {expected.shape}; expected ({m}, {n})")
        expected = expected.reshape(-1)
    d = _bitexact._gemm(np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1), m, n, k, a_format,
                        b_format, out_format, kernel_text, preset is not None or kernel is not None,
                        0 if splits is None else splits, *scales, float(alpha), 0.0 if beta is None else float(beta), c,
                        bias, threads, action, expected, *element)
    return d.reshape(m, n) if action == "run" else d


def _matmul_call(a, b, a_format, b_format, out_format, scale_a, scale_b, name):
    """A and B as bit patterns of their formats, and M, N, K, for identify_matmul and explain_matmul."""
    b_format = a_format if b_format is None else b_format
    a = _matrix(a, a_format, "a")
    b = _matrix(b, b_format, "b")
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"{name}: a is {a.shape} and b is {b.shape}; b needs {a.shape[1]} rows")
    out_format = out_format or ("bf16" if a_format in ("e4m3", "e5m2") else a_format)
    return a, b, b_format, out_format


def identify_matmul(a, b, expected, *, a_format="bf16", b_format=None, out_format=None, scale_a=None, scale_b=None,
                    c=None, alpha=1.0, beta=None, bias=None, preset=None, kernel=None, threads=0):
    """Which descriptions give every bit of `expected` (D [M, N] as a GPU wrote it) for A and B: every preset
    that takes the inputs' formats (or only preset= / kernel=) with every split count from 1 to 64, as
    (name, splits, mismatches) tuples, fewest mismatches first (`bitexact matmul --identify`)."""
    a, b, b_format, out_format = _matmul_call(a, b, a_format, b_format, out_format, scale_a, scale_b,
                                              "identify_matmul")
    return [tuple(r) for r in _gemm(a, b, a.shape[0], b.shape[1], a.shape[1], a_format, b_format, out_format, preset,
                                    kernel, None, scale_a, scale_b, alpha, beta, c, bias, threads, "identify",
                                    expected)]


def explain_matmul(a, b, row, col, *, a_format="bf16", b_format=None, out_format=None, scale_a=None, scale_b=None,
                   c=None, alpha=1.0, beta=None, bias=None, preset=None, kernel=None, splits=None):
    """The arithmetic of D[row, col] as a dict (`bitexact matmul --explain ROW,COL`): "splits", each with its K
    range, its "pieces" (each a chain: its "steps" with the window e_max and lsb_exponent, the terms cut and
    the accumulator's bits after each, the chain's result, the split's fp32 accumulator after it) and the
    reduction so far ("total"); then "sum", "scaled", "alpha_beta", "biased" where the call has them, and "out",
    D[row, col]'s bits. Values are bit patterns (fp32 unless the output's)."""
    a, b, b_format, out_format = _matmul_call(a, b, a_format, b_format, out_format, scale_a, scale_b,
                                              "explain_matmul")
    return _gemm(a, b, a.shape[0], b.shape[1], a.shape[1], a_format, b_format, out_format, preset, kernel, splits,
                 scale_a, scale_b, alpha, beta, c, bias, 0, "explain", None, (int(row), int(col)))


def list_matmul_kernels():
    """Every matrix-product preset as (name, one-line summary) (`bitexact matmul --list-kernels`)."""
    return list(_bitexact._gemm_presets())


def matmul_kernel_description(name):
    """A matrix-product preset's description as a dict, the JSON object matmul(kernel=...) takes
    (`bitexact matmul --print-kernel NAME`; docs/matmul.md lists the fields)."""
    return json.loads(_bitexact._gemm_preset_json(name))


def _mufu(function, x, ftz):
    bits = as_bits(x, "fp32", "x")
    out = _bitexact._mufu(function + ("_ftz" if ftz else ""), np.ascontiguousarray(bits).reshape(-1))
    return out.reshape(bits.shape)


def ex2_approx(x, ftz=False):
    """ex2.approx{.ftz}.f32 (MUFU.EX2, tables captured on an H200) on fp32 bit patterns."""
    return _mufu("ex2_approx", x, ftz)


def rcp_approx(x, ftz=False):
    """rcp.approx{.ftz}.f32 (MUFU.RCP) on fp32 bit patterns."""
    return _mufu("rcp_approx", x, ftz)


def lg2_approx(x, ftz=False):
    """lg2.approx{.ftz}.f32 (MUFU.LG2, tables captured on an H100) on fp32 bit patterns."""
    return _mufu("lg2_approx", x, ftz)


def cvt(instruction, x, lo=None):
    """A GPU conversion by its PTX name, on fp32 bit patterns: cvt.rn.bf16.f32, cvt.rz.bf16.f32,
    cvt.rn.satfinite.bf16.f32, cvt.rn.relu.bf16.f32, cvt.rn.f16.f32 (uint16 results), or the
    packing cvt.rn.bf16x2.f32 and cvt.rn.f16x2.f32 (x lands in the upper half, lo in the lower; uint32)."""
    bits = as_bits(x, "fp32", "x")
    if lo is not None:
        lo = as_bits(lo, "fp32", "lo")
        if lo.shape != bits.shape:
            raise ValueError(f"cvt: x is {bits.shape} and lo is {lo.shape}; they pack element by element")
        lo = np.ascontiguousarray(lo).reshape(-1)
    return _bitexact._cvt(instruction, np.ascontiguousarray(bits).reshape(-1), lo).reshape(bits.shape)


# ---------------------------------------------------------------- attention

# The GPU records (hardware/gpu.hpp): gpu= of the attention functions takes a name; the first is the default.
GPUS = tuple(name for name, _summary, _sm_count, _arch in _bitexact._gpus())


def list_gpus():
    """Every GPU record as (name, summary, SM count, architecture), the default first (`bitexact attention --help`)."""
    return list(_bitexact._gpus())


# The registry's presets (attention/kernels.hpp), in its order; the first is the default.
_PRESETS = tuple(_bitexact._attention_presets())
ATTENTION_PRESETS = tuple(name for name, _summary in _PRESETS)


def list_kernels():
    """Every preset as (name, one-line summary), in the registry's order (`bitexact attention --list-kernels`):
    the GPU kernels, then the paper's PyTorch arithmetic. The first is the default of attention()."""
    return list(_PRESETS)


def kernel_description(name):
    """A GPU kernel preset's description as a dict: the JSON object that attention(kernel=...) takes
    (`bitexact attention --print-kernel NAME`; docs/attention.md lists the fields). Change a field and pass
    the dict as kernel= to compute with another kernel, e.g.
    ``d = kernel_description("pytorch_sdpa_flash_sm90"); d["exponent"] = "fma"``."""
    return json.loads(_bitexact._kernel_description(name))


def _check_finite_numbers(description, path):
    """A dict description's NaN or infinity, refused naming its field as the library names fields (JSON, which
    json.dumps would write it into, has no such number, and its parser would blame a column the user never wrote)."""
    for key, value in description.items():
        field = f"{path}.{key}" if path else str(key)
        if isinstance(value, dict):
            _check_finite_numbers(value, field)
        elif isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"kernel description: field '{field}': expected a finite number, not {value!r}")


def _kernel_text(kernel):
    """The JSON text of kernel=: a dict, or the path of a .json file (str or os.PathLike); None stays None."""
    if kernel is None:
        return None
    if isinstance(kernel, dict):
        _check_finite_numbers(kernel, "")
        return json.dumps(kernel)
    if not isinstance(kernel, (str, os.PathLike)):
        raise TypeError(f"kernel= is a description as a dict or the path of a .json file, not {type(kernel).__name__}")
    with open(kernel, encoding="utf-8") as file:
        return file.read()


def _attention_operands(q, k, v, format="bf16"):
    q, k, v = (as_bits(x, format, name) for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim not in (2, 4) or k.ndim != q.ndim or v.shape != k.shape:
        raise ValueError(f"attention: expected q [B, H, N, d] and k, v [B, H, N_k, d] (or [N, d] and [N_k, d]), "
                         f"got q {q.shape}, k {k.shape}, v {v.shape}")
    if q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: k {k.shape} does not match q {q.shape} in batch, heads or head dim")
    return q, k, v


# The per-call scales of fp8 attention kernels, in the order the library takes them.
FP8_SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")


def _one_byte(x):
    """Whether x holds one-byte elements (fp8 bit patterns, or ml_dtypes' or PyTorch's fp8 types)."""
    if _is_torch_tensor(x):
        return x.element_size() == 1
    return np.asarray(x).dtype.itemsize == 1


def _fp8_format(x):
    """The fp8 format x's dtype names (ml_dtypes' or PyTorch's float8_e5m2 and float8_e4m3fn), or None for
    plain one-byte bit patterns."""
    dtype = str(getattr(x, "dtype", ""))
    named = _TORCH_FORMATS.get(dtype) or _NUMPY_FORMATS.get(dtype)
    return named if named in ("e4m3", "e5m2") else None


def _fp8_operands(q, k, v, preset, kernel, what):
    """q, k and v of an fp8 kernel as bits. Plain bytes are the kernel's input format, whichever its
    description gives; arrays whose dtype names the other fp8 format are refused."""
    named = _fp8_format(q)
    if named is not None:
        try:
            description = json.loads(kernel if kernel else _bitexact._kernel_description(preset or ATTENTION_PRESETS[0]))
            takes = description.get("inputs", "bf16") if isinstance(description, dict) else None
        except (ValueError, RuntimeError):
            takes = None  # a name or description the library refuses, in its own words, below
        if takes in ("e4m3", "e5m2") and takes != named:
            raise ValueError(f"{what}: q is {q.dtype} ({named}), but the kernel takes {takes} Q, K and V")
    return _attention_operands(q, k, v, named or "e4m3")


def attention(q, k, v, *, preset=None, kernel=None, causal=False, scale=None, splits=None, gpu=None,
              batch_heads=None, beta=None, eps=None, autocast=True, threads=0, descale_q=None, descale_k=None,
              descale_v=None, descale_s=None, scale_s=None, scale_o=None):
    """The flash-attention forward pass as a preset or a kernel description computes it; (o, lse).

    q [B, H, N, d], k and v [B, H, N_k, d] (or one head, [N, d]) of bf16 bits. o has q's
    shape (bf16 bits), lse [B, H, N] (fp32 bits; .view(np.float32) for the numbers); for
    paper_reference_fp64 both are float64.

    fp8 kernels (the presets whose description's inputs are e4m3, or a description whose
    inputs are e4m3 or e5m2) take q, k, v of fp8 bits (uint8, or ml_dtypes' float8 arrays)
    and the call's scales as cuDNN's fp8 SDPA takes them: descale_q, descale_k, descale_v
    (the inputs' dequantizing factors), descale_s and scale_s (P's), scale_o (O's); each a
    positive finite number, 1 when not given. o is then in the kernel's output format
    (its o_rounding): e4m3 bits (uint8) for cuDNN's fp8 recipe, bf16 bits (uint16) for
    FA2's (bitexact's FP8 kernel); lse is L (fp32 bits). splits, batch_heads and autocast
    are not options of fp8 kernels; beta and eps set a stabilized fp8 preset's rule.

    preset: a name of ATTENTION_PRESETS (list_kernels() has their summaries); default the
    first, pytorch_sdpa_flash_sm90. kernel: instead of a preset, a GPU kernel's description,
    a dict (kernel_description(name) gives a preset's) or the path of a .json file such as
    examples/triton/flash_forward.json. A description that is not understood raises
    ValueError naming the field; giving both preset and kernel raises ValueError.

    scale: the softmax scale (default PyTorch's 1/sqrt(d), or d ** -0.5 for the paper
    presets). GPU kernels only: splits (the split-KV count instead of PyTorch's heuristic;
    kernels with FA2's split-KV path), gpu (a name of GPUS, default the first, h100_sxm:
    its SM count feeds the heuristic), batch_heads=(B, H) of the call the heads came from
    (the heuristic counts the whole call). beta, eps: the stabilized rule's (default the
    kernel's own: 2 and 1e-3 for the stabilized presets; other models raise ValueError);
    autocast: the paper presets under torch.autocast (True) or not (False; other models
    raise ValueError). threads: how many threads compute the heads and their rows (0, the
    default, one per core; the bits do not depend on it).
    """
    _check_options("attention", preset=preset, causal=causal, scale=scale, splits=splits, gpu=gpu, beta=beta, eps=eps,
                   autocast=autocast, threads=threads)
    kernel = _kernel_text(kernel)
    scales = [descale_q, descale_k, descale_v, descale_s, scale_s, scale_o]
    if _one_byte(q) or any(x is not None for x in scales):
        return _attention_fp8(q, k, v, preset, kernel, causal, scale, gpu, threads, scales, beta, eps,
                              splits=splits, batch_heads=batch_heads, autocast=autocast)
    q, k, v = _attention_operands(q, k, v)
    n, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    batch, heads = q.shape[:2] if q.ndim == 4 else (1, 1)
    flat = [np.ascontiguousarray(x).reshape(-1) for x in (q, k, v)]
    o, lse = _bitexact._attention(*flat, batch, heads, n, n_k, d, causal, scale, splits, gpu,
                                  None if batch_heads is None else tuple(batch_heads), preset, kernel, beta, eps,
                                  autocast, int(threads))
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])


def _attention_fp8(q, k, v, preset, kernel, causal, scale, gpu, threads, scales, beta, eps, **bf16_only):
    given = [name for name, value in bf16_only.items() if value is not None and not (name == "autocast" and value)]
    if given:
        raise ValueError(f"attention: {', '.join(given)} {'is not an option' if len(given) == 1 else 'are not options'} "
                         f"of fp8 kernels")
    q, k, v = _fp8_operands(q, k, v, preset, kernel, "attention")
    n, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    batch, heads = q.shape[:2] if q.ndim == 4 else (1, 1)
    flat = [np.ascontiguousarray(x).reshape(-1) for x in (q, k, v)]
    o, lse = _bitexact._attention_fp8(*flat, batch, heads, n, n_k, d, causal, scale,
                                      [None if x is None else float(x) for x in scales], gpu, preset, kernel,
                                      int(threads), beta, eps)
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])


def attention_backward(q, k, v, o, lse, d_o, *, causal=False, scale=None, batch_heads=None, gpu=None, threads=0):
    """PyTorch's flash-attention backward pass as the H100 runs it (torch 2.11's FA2 kernels,
    under torch.use_deterministic_algorithms(True)), bit for bit: a dict of dq, dk, dv (bf16
    bits, shaped like q, k, v) and delta = rowsum(dO * O) (fp32 bits, shaped like lse).

    q, o, d_o [B, H, N, d] and k, v [B, H, N_k, d] (or one head, [N, d] and [N_k, d]) of bf16
    bits; o and lse the forward's (attention(..., preset="pytorch_sdpa_flash_sm90") gives
    PyTorch flash's), lse fp32 bits (or float32) [B, H, N]. causal: flash-attention's mask,
    bottom-right aligned. scale: the softmax scale (default 1/sqrt(d)). dQ's additions are
    dealt to ceil(SMs / (B H)) buffers, the SMs of gpu (a name of GPUS, default h100_sxm), B and
    H those of the call the heads came from (batch_heads=(B, H); default the arrays' own).
    threads: as attention()'s (0, the default, one per core; the bits do not depend on it).
    """
    _check_options("attention_backward", causal=causal, scale=scale, gpu=gpu, threads=threads)
    q, k, v = _attention_operands(q, k, v)
    o, d_o = as_bits(o, "bf16", "o"), as_bits(d_o, "bf16", "d_o")
    for name, x in (("o", o), ("d_o", d_o)):
        if x.shape != q.shape:
            raise ValueError(f"attention_backward: {name} has shape {x.shape}; expected q's {q.shape}")
    lse = as_bits(lse, "fp32", "lse")
    if lse.shape != q.shape[:-1]:
        raise ValueError(f"attention_backward: lse has shape {lse.shape}; expected {q.shape[:-1]} (one value a query row)")
    n, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    batch, heads = q.shape[:2] if q.ndim == 4 else (1, 1)
    flat = [np.ascontiguousarray(x).reshape(-1) for x in (q, k, v, o, lse, d_o)]
    dq, dk, dv, delta = _bitexact._attention_backward(*flat, batch, heads, n, n_k, d, causal, scale, gpu,
                                                      None if batch_heads is None else tuple(batch_heads),
                                                      int(threads))
    return {"dq": dq.reshape(q.shape), "dk": dk.reshape(k.shape), "dv": dv.reshape(k.shape),
            "delta": delta.reshape(q.shape[:-1])}


def attention_row(q, k, v, row, *, col=None, style="text", preset=None, kernel=None, causal=False, scale=None,
                  splits=None, gpu=None, batch_heads=None, beta=None, eps=None, descale_q=None, descale_k=None,
                  descale_v=None, descale_s=None, scale_s=None, scale_o=None):
    """One query row of one head ([N, d] operands) through a GPU kernel (a preset or kernel=, as
    attention() takes them): a dict of the row's intermediates, every K/V block in the order it ran
    (scores, P, bf16(P), the row sums, unnormalised O; bits), each split's end, and the row's o and lse.

    With FA2's arithmetic the sums are the quad's four partial sums and a split's "inverse" is RN(1 / l);
    a kernel that keeps the max in the exponent's units (max_units "exponent": Triton's, FlexAttention's)
    records its maxima in those units and its row sum in the first of the four, and one that divides
    (normalization "div.full.f32") the divisor l as "inverse". With col=, also "steps": every
    rounding of O[row][col] as traces rendered in style (text, markdown, latex, json); the trace follows
    FA2's arithmetic, in bf16 or as our FP8 kernel's recipe (the bitexact_flash_fp8_sm90 presets: q, k, v
    of e4m3 bits and the scales as attention() takes them; each block also holds "p_e4m3", the P-bar P V
    took), and other kernels raise ValueError."""
    _check_options("attention_row", style=style, preset=preset, causal=causal, scale=scale, splits=splits, gpu=gpu,
                   beta=beta, eps=eps)
    kernel = _kernel_text(kernel)
    scales = [descale_q, descale_k, descale_v, descale_s, scale_s, scale_o]
    q, k, v = _fp8_operands(q, k, v, preset, kernel, "attention_row") if _one_byte(q) else _attention_operands(q, k, v)
    if q.ndim != 2:
        raise ValueError(f"attention_row takes one head: q [N, d], k and v [N_k, d]; got q {q.shape}")
    flat = [np.ascontiguousarray(x).reshape(-1) for x in (q, k, v)]
    return _bitexact._attention_row(*flat, q.shape[0], k.shape[0], q.shape[1], row, -1 if col is None else col,
                                    causal, scale, splits, gpu,
                                    None if batch_heads is None else tuple(batch_heads), preset, kernel, beta, eps,
                                    style, [None if x is None else float(x) for x in scales])


# ---------------------------------------------------------------- the leading indicator

_INDICATOR_COUNTS = ("rows", "rows_with_max_repeated", "rows_with_p_bar_one_twice",
                     "rows_with_p_bar_one_twice_at_final_max", "most_p_bar_ones_in_a_row")
_INDICATOR_ROWS = ("row_max_repeated", "row_p_bar_ones", "row_p_bar_ones_at_final_max")


def repeated_max(s=None, head_dim=None, *, q=None, k=None, preset=None, kernel=None, causal=False, scale=None,
                 splits=None, gpu=None, batch_heads=None, beta=None, eps=None, per_row=False):
    """The leading indicator of docs/bias.md per head: a dict of the rows, the rows whose max repeats (two
    keys within eps of it by the stabilized rule's test), the rows where the kernel's bf16 P is exactly 1 at
    two or more keys of one split (and of those, at its final running max), and the most such keys in a row.

    s: the raw scores Q K^T as the kernel computes them, float32 (or fp32 bits) [B, H, N, N_k] or [N, N_k],
    with head_dim (it picks the kernel's tiles and default scale); or q and k (bf16 bits, [B, H, N, d] or
    [N, d]), S then computed with the kernel's tensor-core model (slow). Counts are [B, H] int64 arrays (ints
    for one head). eps: the tie test's (default: the rule's, 1e-3). per_row: also row_max_repeated,
    row_p_bar_ones and row_p_bar_ones_at_final_max, [B, H, N] (or [N]). The other arguments as attention()'s;
    the kernel (preset or kernel=) must compute with FA2's arithmetic, whose P the indicator replays (the
    pytorch_sdpa_flash_sm90 presets; others raise ValueError). beta: the stabilized rule's (its epsilon stays
    the kernel's).
    """
    _check_options("repeated_max", preset=preset, causal=causal, scale=scale, splits=splits, gpu=gpu, beta=beta,
                   eps=eps)
    kernel = _kernel_text(kernel)
    if (s is None) == (q is None and k is None) or (q is None) != (k is None):
        raise ValueError("repeated_max: give the scores s (with head_dim), or q and k")
    if s is not None:
        if head_dim is None:
            raise ValueError("repeated_max: s needs head_dim (the kernel's tiles and default scale depend on it)")
        s = as_bits(s, "fp32", "s")
        if s.ndim not in (2, 4):
            raise ValueError(f"repeated_max: expected s [B, H, N, N_k] or [N, N_k], got {s.shape}")
        lead, (n, n_k), d = s.shape[:-2], s.shape[-2:], head_dim
        operands = (np.ascontiguousarray(s).reshape(-1), None, None)
    else:
        q, k = as_bits(q, "bf16", "q"), as_bits(k, "bf16", "k")
        if q.ndim not in (2, 4) or k.ndim != q.ndim or q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
            raise ValueError(f"repeated_max: expected q [B, H, N, d] and k [B, H, N_k, d] (or [N, d] and [N_k, d]), "
                             f"got q {q.shape}, k {k.shape}")
        if head_dim is not None and head_dim != q.shape[-1]:
            raise ValueError(f"repeated_max: head_dim {head_dim} but q's last dimension is {q.shape[-1]}")
        lead, n, n_k, d = q.shape[:-2], q.shape[-2], k.shape[-2], q.shape[-1]
        operands = (None, np.ascontiguousarray(q).reshape(-1), np.ascontiguousarray(k).reshape(-1))
    batch, heads = lead if lead else (1, 1)
    out = _bitexact._repeated_max(*operands, batch, heads, n, n_k, d, causal, scale, splits, gpu,
                                  None if batch_heads is None else tuple(batch_heads), preset, kernel, beta, eps)
    result = {name: (int(out[name][0]) if not lead else out[name].reshape(lead)) for name in _INDICATOR_COUNTS}
    if per_row:
        result.update({name: out[name].reshape(tuple(lead) + (n,)) for name in _INDICATOR_ROWS})
    return result


def p_bar_one_range():
    """(lowest, highest): the exponent arguments x, as np.float32, whose P-bar = bf16(ex2.approx(x)) is exactly 1."""
    return tuple(np.uint32(bits).view(np.float32) for bits in _bitexact._p_bar_one_range())


def repeated_max_torch(s, head_dim, **options):
    """repeated_max's counts from a float32 PyTorch tensor s [B, H, N, N_k] (or [N, N_k]) on any device, in
    PyTorch float32 operations (torch imported only here); bitexact/torch_indicator.py says how."""
    from .torch_indicator import repeated_max_torch as run
    return run(s, head_dim, **options)
