"""Shared fixtures of the binding's tests: the `bitexact` command (the C++ results
the binding is compared with), readers of the GPU captures in tests/data, and
vectorised hex columns in TestFloat's line format."""

import os
import pathlib
import shutil
import struct
import subprocess

import numpy as np
import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]

# Elements compared bit for bit, by test, printed at the end of the run.
_COMPARED = {}


@pytest.fixture
def compared(request):
    """compared(n): count n elements compared bit for bit by this test (the total is printed at the end)."""
    def count(n):
        _COMPARED[request.node.nodeid] = _COMPARED.get(request.node.nodeid, 0) + int(n)
        return n
    return count


def pytest_terminal_summary(terminalreporter):
    if _COMPARED:
        passing = "failures above; in the tests that passed" if terminalreporter.stats.get("failed") else "all"
        terminalreporter.write_line(f"bitexact: {sum(_COMPARED.values()):,} elements compared bit for bit by "
                                    f"{len(_COMPARED)} tests ({passing} identical)")
        if terminalreporter.config.option.verbose > 0:
            for test, count in _COMPARED.items():
                terminalreporter.write_line(f"  {count:>10,}  {test}")


@pytest.fixture(scope="session")
def data_dir():
    path = pathlib.Path(os.environ.get("BITEXACT_TEST_DATA_DIR", REPOSITORY / "tests" / "data"))
    assert (path / "README.md").is_file(), f"no test data in {path}"
    return path


@pytest.fixture(scope="session")
def cli():
    """The path of the `bitexact` command (ctest passes it in $BITEXACT_CLI)."""
    path = os.environ.get("BITEXACT_CLI") or shutil.which("bitexact")
    if not path:
        pytest.skip("the bitexact command is not built ($BITEXACT_CLI unset)")
    return path


# ---- TestFloat's line format, vectorised: fixed-width upper-case hex fields

_DIGITS = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_VALUE_OF = np.full(256, 255, np.uint8)
_VALUE_OF[_DIGITS] = np.arange(16, dtype=np.uint8)
_VALUE_OF[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16, dtype=np.uint8)


def hex_lines(columns, digits):
    """The bytes of lines "HEX HEX ...\\n", column i written with digits[i] hex digits."""
    count = len(columns[0])
    width = sum(digits) + len(digits)
    text = np.full((count, width), ord(" "), np.uint8)
    at = 0
    for column, n in zip(columns, digits):
        values = np.asarray(column, np.uint64)
        for place in range(n):
            text[:, at + n - 1 - place] = _DIGITS[(values >> np.uint64(4 * place)) & np.uint64(15)]
        at += n + 1
    text[:, -1] = ord("\n")
    return text.tobytes()


def read_hex_lines(output, digits):
    """The columns of fixed-width hex lines, as uint64 arrays."""
    width = sum(digits) + len(digits)
    raw = np.frombuffer(output, np.uint8)
    assert raw.size % width == 0, f"lines are not {width} bytes wide: {output[:200]!r}"
    text = raw.reshape(-1, width)
    values = _VALUE_OF[text]
    columns, at = [], 0
    for n in digits:
        field = values[:, at:at + n].astype(np.uint64)
        assert (field < 16).all(), "a field holds a character that is not a hex digit"
        column = np.zeros(len(text), np.uint64)
        for place in range(n):
            column = (column << np.uint64(4)) | field[:, place]
        columns.append(column)
        at += n + 1
    return columns


def run_eval(cli, function, operands, operand_digits, result_digits, options=()):
    """`bitexact eval FUNCTION OPTIONS` on the operand columns: (results, flags) as uint64 arrays."""
    lines = hex_lines(operands, operand_digits)
    done = subprocess.run([cli, "eval", function, *options], input=lines, capture_output=True, check=True)
    columns = read_hex_lines(done.stdout, [*operand_digits, result_digits, 2])
    for given, echoed in zip(operands, columns):
        assert (np.asarray(given, np.uint64) == echoed).all(), "eval echoed other operands"
    return columns[-2], columns[-1]


# ---- GPU captures (layouts in tests/data/README.md and cuda/capture/README.md)

def _replay_payload(path):
    data = path.read_bytes()
    assert data[:8] == b"BXDATA1\0", f"{path}: not a replay file"
    kind, provenance_bytes, payload_bytes, _checksum = struct.unpack_from("<IIQQ", data, 8)
    start = 8 + 24 + provenance_bytes
    assert len(data) - start == payload_bytes, f"{path}: truncated"
    return kind, data[start:]


def read_tiles(path):
    """The tensor-core tiles of a replay file: dict of m, n, k and arrays a [T, M, K], b [T, K, N], c and d [T, M, N]."""
    kind, payload = _replay_payload(path)
    assert kind == 1
    variant, m, n, k, count, acc_bytes = struct.unpack_from("<6I", payload, 0)
    acc = {2: "<u2", 4: "<u4"}[acc_bytes]
    # Variants 4-11 hold fp8 bytes, 12 the 32-bit registers of tf32 operands (cuda/capture/README.md).
    element = "<u1" if 4 <= variant <= 11 else "<u4" if variant == 12 else "<u2"
    tile = np.dtype([("class", "<u4"), ("index", "<u4"), ("a", element, (m, k)), ("b", element, (k, n)),
                     ("c", acc, (m, n)), ("d", acc, (m, n))])
    tiles = np.frombuffer(payload, tile, count, offset=24)
    assert len(payload) == 24 + count * tile.itemsize
    return dict(variant=variant, m=m, n=n, k=k, a=tiles["a"], b=tiles["b"], c=tiles["c"], d=tiles["d"])


def read_section(path):
    """The arrays of a scalar-instruction replay file, by name (inputs a, b, c or x; outputs by PTX name)."""
    kind, payload = _replay_payload(path)
    assert kind == 2
    count, array_count = struct.unpack_from("<II", payload, 48)
    at = 56
    headers = []
    for _ in range(array_count):
        name = payload[at:at + 40].split(b"\0")[0].decode()
        element_bytes, _is_input = struct.unpack_from("<II", payload, at + 40)
        headers.append((name, element_bytes))
        at += 48
    arrays = {}
    for name, element_bytes in headers:
        arrays[name] = np.frombuffer(payload, {2: "<u2", 4: "<u4"}[element_bytes], count, offset=at)
        at += count * element_bytes
    assert at == len(payload)
    return arrays


def _varints(stream):
    """LEB128 varints of a byte string, vectorised: the value of each, as uint64."""
    raw = np.frombuffer(stream, np.uint8)
    last = (raw & 0x80) == 0
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    group = np.repeat(np.arange(len(ends)), ends - starts + 1)
    place = np.arange(raw.size) - starts[group]
    pieces = (raw & 0x7F).astype(np.uint64) << (np.uint64(7) * place.astype(np.uint64))
    return np.bitwise_or.reduceat(pieces, starts)


def read_mufu_samples(path):
    """x and the GPU's ex2.approx.ftz, ex2.approx, rcp.approx.ftz, rcp.approx outputs (docs/mufu.md)."""
    data = path.read_bytes()
    assert data[:8] == b"BXMUFUS\0"
    _version, records, _captured, stream_bytes, _checksum = struct.unpack_from("<IIIIQ", data, 8)
    stream = data[8 + 24 + 128:]
    assert len(stream) == stream_bytes
    fields = _varints(stream).reshape(records, 5)
    mask = np.uint64(0xFFFFFFFF)

    def unzigzag(n):
        return (n >> np.uint64(1)) ^ (np.uint64(0) - (n & np.uint64(1)))

    x = np.cumsum(fields[:, 0]) & mask
    ex2_ftz = np.cumsum(unzigzag(fields[:, 1])) & mask
    ex2 = (ex2_ftz + unzigzag(fields[:, 2])) & mask
    rcp_ftz = np.cumsum(unzigzag(fields[:, 3])) & mask
    rcp = (rcp_ftz + unzigzag(fields[:, 4])) & mask
    return {name: column.astype(np.uint32) for name, column in
            (("x", x), ("ex2_ftz", ex2_ftz), ("ex2", ex2), ("rcp_ftz", rcp_ftz), ("rcp", rcp))}
