"""Linear layouts: linear maps over GF(2) from hardware locations to tile coordinates.

A layout has named input dimensions (``register``, ``lane``, ``warp``, ``block`` for register
tiles, ``offset`` for memory), each of size 2^n and described by n basis vectors, and named
output dimensions (``dim0``, ``dim1``, ...) of power-of-two sizes. The image of an input is the
XOR of the basis vectors of its set bits (docs/layouts.md#the-map).

Flattening conventions, used by every operation that concatenates dimensions:
- input dims are concatenated minor to major in declaration order, so with
  ``register, lane, warp`` the register bits are the least significant;
- output dims are concatenated row-major: the last declared output dim is the fastest
  (numpy ``reshape`` semantics), so ``(i, j)`` of a ``C``-column tile flattens to ``i*C + j``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from .gf2 import XorBasis, log2_exact

Basis = tuple[int, ...]
"""The image of one input bit: one component per output dim, in output-dim order."""

REGISTER = "register"
LANE = "lane"
WARP = "warp"
BLOCK = "block"
OFFSET = "offset"


def dim_names(rank: int) -> tuple[str, ...]:
    """Standard tile output-dimension names ``dim0 .. dim{rank-1}``."""
    return tuple(f"dim{i}" for i in range(rank))


@dataclass(frozen=True)
class Vectorisation:
    """How a thread's registers group into contiguous vector accesses.

    Invariant: ``register_order`` is a permutation of the register bit indices whose first
    ``log2(width)`` entries are the bits moving along consecutive elements (1, 2, 4, ...), so
    the registers of one vector differ only in those bits.
    """

    width: int
    register_order: tuple[int, ...]

    @property
    def vector_bits(self) -> tuple[int, ...]:
        """Register bits that index the elements inside one vector."""
        return self.register_order[: self.width.bit_length() - 1]

    def vector_starts(self, register_bits: int) -> tuple[int, ...]:
        """First register of every vector (vector bits zero), ascending."""
        mask = ((1 << register_bits) - 1) & ~sum(1 << b for b in self.vector_bits)
        return tuple(r for r in range(1 << register_bits) if r & ~mask == 0)

    def vector_registers(self, start: int) -> tuple[int, ...]:
        """Registers of the vector beginning at ``start``, in element order."""
        out = []
        for i in range(self.width):
            register = start
            for j, bit in enumerate(self.vector_bits):
                if (i >> j) & 1:
                    register |= 1 << bit
            out.append(register)
        return tuple(out)


@dataclass(frozen=True)
class LinearLayout:
    """A linear map F2^N → F2^M given by the images of the input bits.

    Invariants (checked on construction): dimension names are unique, output sizes are powers
    of two, every basis has one component per output dim and every component is below that
    dim's size. Surjectivity is not implied; `from_bases` checks it by default.
    """

    in_dims: tuple[tuple[str, tuple[Basis, ...]], ...]
    out_dims: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        in_names = [name for name, _ in self.in_dims]
        out_names = [name for name, _ in self.out_dims]
        if len(set(in_names)) != len(in_names):
            raise ValueError(f"duplicate input dims {in_names}")
        if len(set(out_names)) != len(out_names):
            raise ValueError(f"duplicate output dims {out_names}")
        for name, size in self.out_dims:
            log2_exact(size, f"size of output dim {name!r}")
        for name, bases in self.in_dims:
            for basis in bases:
                if len(basis) != len(self.out_dims):
                    raise ValueError(f"basis {basis} of {name!r} needs {len(self.out_dims)} components")
                for value, (out, size) in zip(basis, self.out_dims, strict=True):
                    if not 0 <= value < size:
                        raise ValueError(f"basis {basis} of {name!r} leaves {out!r} (size {size})")

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_bases(
        cls,
        bases: Mapping[str, Sequence[Sequence[int] | int]],
        out_dims: Mapping[str, int] | Sequence[str],
        *,
        require_surjective: bool = True,
    ) -> LinearLayout:
        """Build a layout from ``{in_dim: [basis, ...]}``.

        A basis may be a plain int when there is one output dim. ``out_dims`` is either a
        mapping of names to sizes or a list of names whose sizes are inferred as the smallest
        power of two holding every component.
        """
        names = list(out_dims)
        normalised: list[tuple[str, tuple[Basis, ...]]] = []
        for name, vectors in bases.items():
            rows = []
            for v in vectors:
                row = (v,) if isinstance(v, int) else tuple(v)
                if len(row) != len(names):
                    raise ValueError(f"basis {v} of {name!r} needs {len(names)} components")
                rows.append(row)
            normalised.append((name, tuple(rows)))
        if isinstance(out_dims, Mapping):
            sizes = [out_dims[n] for n in names]
        else:
            sizes = [1] * len(names)
            for _, dim_rows in normalised:
                for row in dim_rows:
                    for i, value in enumerate(row):
                        sizes[i] = max(sizes[i], 1 << value.bit_length())
        layout = cls(tuple(normalised), tuple(zip(names, sizes, strict=True)))
        if require_surjective and not layout.is_surjective:
            raise ValueError(f"layout is not surjective:\n{layout}")
        return layout

    @classmethod
    def empty(cls) -> LinearLayout:
        """The layout with no inputs and no outputs (unit of the product)."""
        return cls((), ())

    @classmethod
    def identity_1d(cls, size: int, in_dim: str, out_dim: str) -> LinearLayout:
        """x ↦ x on ``size`` elements."""
        n = log2_exact(size)
        return cls(((in_dim, tuple((1 << k,) for k in range(n))),), ((out_dim, size),))

    @classmethod
    def zeros_1d(cls, size: int, in_dim: str, out_dim: str, out_size: int = 1) -> LinearLayout:
        """x ↦ 0 on ``size`` inputs: pure broadcast."""
        n = log2_exact(size)
        return cls(((in_dim, tuple((0,) for _ in range(n))),), ((out_dim, out_size),))

    @classmethod
    def strided_1d(cls, size: int, stride: int, in_dim: str, out_dim: str) -> LinearLayout:
        """x ↦ stride·x for a power-of-two stride."""
        n = log2_exact(size)
        log2_exact(stride, "stride")
        return cls(((in_dim, tuple((stride << k,) for k in range(n))),), ((out_dim, size * stride),))

    @classmethod
    def identity(cls, dims: Mapping[str, int]) -> LinearLayout:
        """The identity on several dims: input dim d maps onto output dim d of the same size."""
        names = list(dims)
        in_dims = []
        for i, name in enumerate(names):
            n = log2_exact(dims[name], f"size of {name!r}")
            bases = tuple(tuple((1 << k) if j == i else 0 for j in range(len(names))) for k in range(n))
            in_dims.append((name, bases))
        return cls(tuple(in_dims), tuple((name, dims[name]) for name in names))

    # ----------------------------------------------------------------- shape queries

    @property
    def in_dim_names(self) -> tuple[str, ...]:
        """Input dimension names, minor to major."""
        return tuple(name for name, _ in self.in_dims)

    @property
    def out_dim_names(self) -> tuple[str, ...]:
        """Output dimension names, slowest to fastest."""
        return tuple(name for name, _ in self.out_dims)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Output sizes in output-dim order."""
        return tuple(size for _, size in self.out_dims)

    def has_in_dim(self, name: str) -> bool:
        """True when ``name`` is an input dim."""
        return name in self._in_index

    def has_out_dim(self, name: str) -> bool:
        """True when ``name`` is an output dim."""
        return name in self._out_index

    def bases(self, in_dim: str) -> tuple[Basis, ...]:
        """The basis vectors of one input dim (an absent dim has none)."""
        i = self._in_index.get(in_dim)
        return () if i is None else self.in_dims[i][1]

    def in_dim_size_log2(self, name: str) -> int:
        """Number of bits of an input dim (0 when absent)."""
        return len(self.bases(name))

    def in_dim_size(self, name: str) -> int:
        """Size of an input dim (1 when absent)."""
        return 1 << self.in_dim_size_log2(name)

    def out_dim_size(self, name: str) -> int:
        """Size of an output dim (1 when absent)."""
        i = self._out_index.get(name)
        return 1 if i is None else self.out_dims[i][1]

    def out_dim_size_log2(self, name: str) -> int:
        """Number of bits of an output dim."""
        return self.out_dim_size(name).bit_length() - 1

    @property
    def num_in_bits(self) -> int:
        """N: total number of input bits."""
        return sum(len(bases) for _, bases in self.in_dims)

    @property
    def num_out_bits(self) -> int:
        """M: total number of output bits."""
        return sum(self._out_bits)

    @property
    def total_in_size(self) -> int:
        """2^N."""
        return 1 << self.num_in_bits

    @property
    def total_out_size(self) -> int:
        """2^M."""
        return 1 << self.num_out_bits

    # ----------------------------------------------------------------- flat encoding

    @cached_property
    def _in_index(self) -> dict[str, int]:
        return {name: i for i, (name, _) in enumerate(self.in_dims)}

    @cached_property
    def _out_index(self) -> dict[str, int]:
        return {name: i for i, (name, _) in enumerate(self.out_dims)}

    @cached_property
    def _out_bits(self) -> tuple[int, ...]:
        return tuple(size.bit_length() - 1 for _, size in self.out_dims)

    @cached_property
    def _out_shifts(self) -> tuple[int, ...]:
        shifts = []
        total = 0
        for bits in reversed(self._out_bits):
            shifts.append(total)
            total += bits
        return tuple(reversed(shifts))

    def flatten_point(self, point: Sequence[int]) -> int:
        """Row-major flat index of an output point (tuple in output-dim order)."""
        out = 0
        for value, shift in zip(point, self._out_shifts, strict=True):
            out |= value << shift
        return out

    def unflatten_point(self, flat: int) -> Basis:
        """Inverse of `flatten_point`."""
        return tuple(
            (flat >> shift) & ((1 << bits) - 1)
            for shift, bits in zip(self._out_shifts, self._out_bits, strict=True)
        )

    @cached_property
    def _flat(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(self.flatten_point(b) for b in bases) for _, bases in self.in_dims)

    def flat_bases(self, in_dim: str) -> tuple[int, ...]:
        """Basis vectors of one input dim as row-major flat output indices."""
        i = self._in_index.get(in_dim)
        return () if i is None else self._flat[i]

    @cached_property
    def columns(self) -> tuple[int, ...]:
        """All basis vectors as flat ints, input bits minor to major: the columns of A."""
        return tuple(v for flat in self._flat for v in flat)

    def split_input(self, index: int) -> tuple[int, ...]:
        """Per-input-dim values (in input-dim order) of a flat input index."""
        values = []
        for _, bases in self.in_dims:
            values.append(index & ((1 << len(bases)) - 1))
            index >>= len(bases)
        return tuple(values)

    def join_input(self, values: Mapping[str, int]) -> int:
        """Flat input index of per-dim values (inverse of `split_input`)."""
        index = 0
        shift = 0
        for name, bases in self.in_dims:
            index |= values.get(name, 0) << shift
            shift += len(bases)
        return index

    # ----------------------------------------------------------------- application

    def apply_flat(self, inputs: Mapping[str, int]) -> int:
        """Row-major flat output index of ``inputs`` (missing input dims count as 0)."""
        out = 0
        for name, value in inputs.items():
            i = self._in_index.get(name)
            if i is None:
                raise KeyError(f"unknown input dim {name!r}; have {self.in_dim_names}")
            flat = self._flat[i]
            if not 0 <= value < (1 << len(flat)):
                raise ValueError(f"{name}={value} out of range [0, {1 << len(flat)})")
            k = 0
            while value:
                if value & 1:
                    out ^= flat[k]
                value >>= 1
                k += 1
        return out

    def apply(self, inputs: Mapping[str, int]) -> Basis:
        """Output coordinates (in output-dim order) of ``inputs``; missing inputs count as 0."""
        return self.unflatten_point(self.apply_flat(inputs))

    def apply_index(self, index: int) -> int:
        """Flat output of a flat input index (input dims concatenated minor to major)."""
        out = 0
        k = 0
        columns = self.columns
        while index:
            if index & 1:
                out ^= columns[k]
            index >>= 1
            k += 1
        return out

    # ----------------------------------------------------------------- algebra

    def compose(self, outer: LinearLayout) -> LinearLayout:
        """``outer ∘ self``: apply ``outer`` to every basis of ``self``.

        ``self``'s output dims must be ``outer``'s input dims (any order), each no larger.
        """
        if set(self.out_dim_names) != set(outer.in_dim_names):
            raise ValueError(f"cannot compose: outputs {self.out_dim_names} vs inputs {outer.in_dim_names}")
        for name, size in self.out_dims:
            if size > outer.in_dim_size(name):
                raise ValueError(f"cannot compose: {name!r} has {size} > {outer.in_dim_size(name)}")
        names = self.out_dim_names
        in_dims = tuple(
            (name, tuple(outer.apply(dict(zip(names, b, strict=True))) for b in bases))
            for name, bases in self.in_dims
        )
        return LinearLayout(in_dims, outer.out_dims)

    def __mul__(self, outer: LinearLayout) -> LinearLayout:
        """Product ``self × outer`` (docs/layouts.md#operations): ``self`` supplies the low bits.

        Input dims are the union; on a shared input dim ``self``'s bases come first. Output
        sizes multiply; on a shared output dim ``outer``'s images shift above ``self``'s.
        """
        out_names = list(self.out_dim_names) + [n for n in outer.out_dim_names if not self.has_out_dim(n)]
        sizes = {n: self.out_dim_size(n) * outer.out_dim_size(n) for n in out_names}
        shift = {n: self.out_dim_size_log2(n) for n in out_names}

        def lift(layout: LinearLayout, basis: Basis, shifted: bool) -> Basis:
            values = dict(zip(layout.out_dim_names, basis, strict=True))
            return tuple((values.get(n, 0) << (shift[n] if shifted else 0)) for n in out_names)

        in_names = list(self.in_dim_names) + [n for n in outer.in_dim_names if not self.has_in_dim(n)]
        in_dims = tuple(
            (
                name,
                tuple(lift(self, b, False) for b in self.bases(name))
                + tuple(lift(outer, b, True) for b in outer.bases(name)),
            )
            for name in in_names
        )
        return LinearLayout(in_dims, tuple((n, sizes[n]) for n in out_names))

    def transpose_ins(self, order: Sequence[str]) -> LinearLayout:
        """Reorder the input dims (a permutation of the current names)."""
        if sorted(order) != sorted(self.in_dim_names):
            raise ValueError(f"{list(order)} is not a permutation of {self.in_dim_names}")
        return LinearLayout(tuple((n, self.bases(n)) for n in order), self.out_dims)

    def transpose_outs(self, order: Sequence[str]) -> LinearLayout:
        """Reorder the output dims (a permutation of the current names)."""
        if sorted(order) != sorted(self.out_dim_names):
            raise ValueError(f"{list(order)} is not a permutation of {self.out_dim_names}")
        perm = [self._out_index[n] for n in order]
        in_dims = tuple(
            (name, tuple(tuple(b[p] for p in perm) for b in bases)) for name, bases in self.in_dims
        )
        return LinearLayout(in_dims, tuple(self.out_dims[p] for p in perm))

    def rename_ins(self, mapping: Mapping[str, str]) -> LinearLayout:
        """Rename input dims; names not in ``mapping`` are kept."""
        return LinearLayout(tuple((mapping.get(n, n), b) for n, b in self.in_dims), self.out_dims)

    def rename_outs(self, mapping: Mapping[str, str]) -> LinearLayout:
        """Rename output dims; names not in ``mapping`` are kept."""
        return LinearLayout(self.in_dims, tuple((mapping.get(n, n), s) for n, s in self.out_dims))

    def reshape_outs(self, new_outs: Sequence[tuple[str, int]]) -> LinearLayout:
        """Reinterpret the row-major flattened output as ``new_outs`` (same total size)."""
        target = LinearLayout((), tuple(new_outs))
        if target.total_out_size != self.total_out_size:
            raise ValueError(f"cannot reshape {self.out_dims} to {tuple(new_outs)}")
        in_dims = tuple(
            (name, tuple(target.unflatten_point(v) for v in flat))
            for (name, _), flat in zip(self.in_dims, self._flat, strict=True)
        )
        return LinearLayout(in_dims, target.out_dims)

    def reshape_ins(self, new_ins: Sequence[tuple[str, int]]) -> LinearLayout:
        """Reinterpret the flattened input (minor to major) as ``new_ins`` (same total size)."""
        sizes = [log2_exact(size, f"size of {name!r}") for name, size in new_ins]
        if sum(sizes) != self.num_in_bits:
            raise ValueError(f"cannot reshape inputs {self.in_dim_names} to {tuple(new_ins)}")
        all_bases = [b for _, bases in self.in_dims for b in bases]
        in_dims = []
        start = 0
        for (name, _), n in zip(new_ins, sizes, strict=True):
            in_dims.append((name, tuple(all_bases[start : start + n])))
            start += n
        return LinearLayout(tuple(in_dims), self.out_dims)

    def flatten_outs(self, name: str = OFFSET) -> LinearLayout:
        """One output dim holding the row-major flattening of all outputs."""
        return self.reshape_outs([(name, self.total_out_size)])

    def flatten_ins(self, name: str) -> LinearLayout:
        """One input dim holding all input bits, minor to major."""
        return self.reshape_ins([(name, self.total_in_size)])

    def sublayout(self, in_dims: Iterable[str], out_dims: Iterable[str]) -> LinearLayout:
        """Restrict to some input dims and project onto some output dims (order kept)."""
        keep_in = set(in_dims)
        keep_out = set(out_dims)
        idx = [i for i, (n, _) in enumerate(self.out_dims) if n in keep_out]
        return LinearLayout(
            tuple(
                (name, tuple(tuple(b[i] for i in idx) for b in bases))
                for name, bases in self.in_dims
                if name in keep_in
            ),
            tuple(self.out_dims[i] for i in idx),
        )

    def with_in_dim(self, name: str, bases: Sequence[Basis]) -> LinearLayout:
        """Replace (or append) the bases of one input dim."""
        rows = tuple(tuple(b) for b in bases)
        if self.has_in_dim(name):
            in_dims = tuple((n, rows if n == name else b) for n, b in self.in_dims)
        else:
            in_dims = self.in_dims + ((name, rows),)
        return LinearLayout(in_dims, self.out_dims)

    def resize_in_dim(self, name: str, size: int) -> LinearLayout:
        """Shrink (drop the high bases) or grow (append zero bases) one input dim."""
        n = log2_exact(size)
        bases = list(self.bases(name))[:n]
        bases += [tuple(0 for _ in self.out_dims)] * (n - len(bases))
        return self.with_in_dim(name, bases)

    def remove_zero_bases(self, in_dim: str = REGISTER) -> tuple[LinearLayout, int]:
        """Drop the zero bases of one input dim; also return the mask of the kept bits."""
        bases = self.bases(in_dim)
        kept = [k for k, b in enumerate(bases) if any(b)]
        mask = sum(1 << k for k in kept)
        return self.with_in_dim(in_dim, [bases[k] for k in kept]), mask

    # ----------------------------------------------------------------- linear-algebra queries

    @cached_property
    def rank(self) -> int:
        """Rank of the matrix over GF(2)."""
        return XorBasis(self.columns).rank

    @property
    def is_surjective(self) -> bool:
        """Every output point has a preimage (rank = M)."""
        return self.rank == self.num_out_bits

    @property
    def is_injective(self) -> bool:
        """No two inputs share an output (rank = N)."""
        return self.rank == self.num_in_bits

    @property
    def is_invertible(self) -> bool:
        """Bijective: surjective, injective and N = M."""
        return self.is_surjective and self.is_injective

    def free_variable_masks(self) -> dict[str, int]:
        """Per input dim, the bits whose column depends on earlier columns (duplicates).

        Columns are taken in input order (register, lane, warp, block), so the canonical owner
        of an element is the input with all free bits zero: registers before lanes before warps.
        """
        basis = XorBasis()
        masks = {}
        for name, flat in zip(self.in_dim_names, self._flat, strict=True):
            mask = 0
            for k, v in enumerate(flat):
                if not basis.insert(v):
                    mask |= 1 << k
            masks[name] = mask
        return masks

    def input_basis_mask(self, in_dim: str, out_dim: str) -> int:
        """Bits k of ``in_dim`` whose image moves along ``out_dim``."""
        o = self._out_index[out_dim]
        return sum(1 << k for k, b in enumerate(self.bases(in_dim)) if b[o])

    def is_distributed(self) -> bool:
        """Surjective, every basis zero or a unit vector, nonzero bases distinct (docs/layouts.md#operations)."""
        seen = set()
        for v in self.columns:
            if v == 0:
                continue
            if v & (v - 1) or v in seen:
                return False
            seen.add(v)
        return self.is_surjective

    def invert_and_compose(self, other: LinearLayout) -> LinearLayout:
        """C with ``other(C(x)) = self(x)``: for each input of ``self``, an input of ``other``.

        Requires the same output dims (``self``'s sizes no larger) and image(self) ⊆
        image(other). Each column is solved with ``other``'s free variables set to zero, so
        duplicated targets go to their lowest owner. Input dims whose bases are identical in
        both layouts map by the identity (otherwise broadcast warps would all be sent to warp 0).
        """
        if set(self.out_dim_names) != set(other.out_dim_names):
            raise ValueError(f"output dims differ: {self.out_dim_names} vs {other.out_dim_names}")
        perm = [self._out_index[n] for n in other.out_dim_names]
        for name, size in self.out_dims:
            if size > other.out_dim_size(name):
                raise ValueError(f"output dim {name!r}: {size} > {other.out_dim_size(name)}")
        basis = XorBasis(other.columns)
        out_names = other.in_dim_names
        in_dims = []
        for name, bases in self.in_dims:
            targets = [other.flatten_point(tuple(b[p] for p in perm)) for b in bases]
            same = other.has_in_dim(name) and targets == list(other.flat_bases(name))
            rows = []
            for k, (b, target) in enumerate(zip(bases, targets, strict=True)):
                if same:
                    rows.append(tuple((1 << k) if n == name else 0 for n in out_names))
                    continue
                combination = basis.express(target)
                if combination is None:
                    raise ValueError(f"image of {name}[{k}] = {b} is not in the image of the other layout")
                rows.append(other.split_input(combination))
            in_dims.append((name, tuple(rows)))
        return LinearLayout(tuple(in_dims), tuple((n, other.in_dim_size(n)) for n in out_names))

    def pseudo_invert(self) -> LinearLayout:
        """M (outputs → inputs) with ``self(M(y)) = y`` for every y in the image.

        Uses a reduced echelon basis of the image: output bit j maps to the lowest-owner
        preimage of the image vector pivoted at j, or to 0 when j is not a pivot.
        """
        basis = XorBasis(self.columns)
        pivots: dict[int, int] = {}
        for v in self.columns:
            for p, w in pivots.items():
                if (v >> p) & 1:
                    v ^= w
            if v:
                top = v.bit_length() - 1
                for p, w in pivots.items():
                    if (w >> top) & 1:
                        pivots[p] = w ^ v
                pivots[top] = v
        in_dims = []
        for out_name, shift, bits in zip(self.out_dim_names, self._out_shifts, self._out_bits, strict=True):
            rows = []
            for k in range(bits):
                row = pivots.get(shift + k)
                combination = 0 if row is None else basis.express(row)
                assert combination is not None, "pivot rows lie in the image"
                rows.append(self.split_input(combination))
            in_dims.append((out_name, tuple(rows)))
        return LinearLayout(tuple(in_dims), tuple((n, self.in_dim_size(n)) for n in self.in_dim_names))

    def invert(self) -> LinearLayout:
        """The inverse map of an invertible layout (outputs become inputs)."""
        if not self.is_invertible:
            raise ValueError(f"layout is not invertible:\n{self}")
        return self.pseudo_invert()

    def divide_left(self, divisor: LinearLayout) -> LinearLayout | None:
        """C with ``self = divisor × C`` (same dim orders as ``self``), or None if none exists."""
        for name in divisor.in_dim_names:
            if not self.has_in_dim(name) or divisor.in_dim_size_log2(name) > self.in_dim_size_log2(name):
                return None
        for name in divisor.out_dim_names:
            if not self.has_out_dim(name) or divisor.out_dim_size(name) > self.out_dim_size(name):
                return None
        low = {n: divisor.out_dim_size_log2(n) for n in divisor.out_dim_names}
        lifted = divisor.transpose_outs([n for n in self.out_dim_names if divisor.has_out_dim(n)])
        in_dims = []
        for name, bases in self.in_dims:
            n = divisor.in_dim_size_log2(name)
            prefix = lifted.bases(name)
            for a, d in zip(bases[:n], prefix, strict=True):
                values = dict(zip(lifted.out_dim_names, d, strict=True))
                if a != tuple(values.get(o, 0) for o in self.out_dim_names):
                    return None
            rest = []
            for b in bases[n:]:
                row = []
                for o, value in zip(self.out_dim_names, b, strict=True):
                    bits = low.get(o, 0)
                    if value & ((1 << bits) - 1):
                        return None
                    row.append(value >> bits)
                rest.append(tuple(row))
            in_dims.append((name, tuple(rest)))
        quotient = LinearLayout(tuple(in_dims), tuple((o, s >> low.get(o, 0)) for o, s in self.out_dims))
        product = (divisor * quotient).transpose_ins(self.in_dim_names).transpose_outs(self.out_dim_names)
        return quotient if product == self else None

    def vectorisation(
        self, out_dim: str | None = None, in_dim: str = REGISTER, max_width: int | None = None
    ) -> Vectorisation:
        """Largest run of consecutive elements along ``out_dim`` that every thread accesses.

        Width 2^k needs k bases of ``in_dim`` with images 1, 2, ..., 2^(k-1) along ``out_dim``
        (zero elsewhere) and every other basis zero in the low k bits of ``out_dim``, so each
        thread's run starts aligned. Equivalent to ``identity(2^k, in_dim, out_dim)`` dividing
        the layout on the left after permuting ``in_dim``'s bases (docs/layouts.md#operations).
        """
        if out_dim is None:
            out_dim = self.out_dim_names[-1]
        o = self._out_index[out_dim]
        bases = self.bases(in_dim)
        chosen: list[int] = []
        while max_width is None or (2 << len(chosen)) <= max_width:
            k = len(chosen)
            want = tuple((1 << k) if i == o else 0 for i in range(len(self.out_dims)))
            candidates = [i for i, b in enumerate(bases) if b == want and i not in chosen]
            if not candidates:
                break
            pick = candidates[0]
            mask = (2 << k) - 1
            aligned = all(
                b[o] & mask == 0
                for name, dim_bases in self.in_dims
                for i, b in enumerate(dim_bases)
                if not (name == in_dim and (i == pick or i in chosen))
            )
            if not aligned:
                break
            chosen.append(pick)
        order = tuple(chosen) + tuple(i for i in range(len(bases)) if i not in chosen)
        return Vectorisation(1 << len(chosen), order)

    def vector_width(self, out_dim: str | None = None, max_width: int | None = None) -> int:
        """Contiguous, aligned elements per thread along ``out_dim`` (see `vectorisation`)."""
        return self.vectorisation(out_dim, max_width=max_width).width

    def equal_up_to_register_permutation(self, other: LinearLayout) -> bool:
        """True when each thread holds the same elements in both layouts (docs/layouts.md#operations)."""
        if self.out_dims != other.out_dims:
            return False
        a, _ = self.remove_zero_bases(REGISTER)
        b, _ = other.remove_zero_bases(REGISTER)
        regs = a.flat_bases(REGISTER)
        span_a = XorBasis(regs)
        if span_a.rank != len(regs) or len(regs) != len(b.flat_bases(REGISTER)):
            return False
        if not all(span_a.contains(v) for v in b.flat_bases(REGISTER)):
            return False
        others = [n for n in a.in_dim_names if n != REGISTER]
        if others != [n for n in b.in_dim_names if n != REGISTER]:
            return False
        for name in others:
            fa, fb = a.flat_bases(name), b.flat_bases(name)
            if len(fa) != len(fb) or not all(span_a.contains(x ^ y) for x, y in zip(fa, fb, strict=True)):
                return False
        return True

    def is_trivial_over(self, dims: Iterable[str]) -> bool:
        """For a map between two hardware spaces: identity on ``dims``, no mixing with others.

        Each dim must be both an input and an output of equal size, bit k of input d must map
        to exactly bit k of output d, and no other input may touch those outputs.
        """
        names = set(dims)
        idx = []
        for d in names:
            if not self.has_in_dim(d) or not self.has_out_dim(d):
                return False
            if self.in_dim_size(d) != self.out_dim_size(d):
                return False
            idx.append(self._out_index[d])
        for name, bases in self.in_dims:
            for k, b in enumerate(bases):
                if name in names:
                    o = self._out_index[name]
                    if b != tuple((1 << k) if i == o else 0 for i in range(len(b))):
                        return False
                elif any(b[i] for i in idx):
                    return False
        return True

    def quotient(self, dims: Iterable[str]) -> LinearLayout:
        """Remove input and output dims over which the map is trivial."""
        names = set(dims)
        if not self.is_trivial_over(names):
            raise ValueError(f"layout is not trivial over {sorted(names)}")
        return self.sublayout(
            [n for n in self.in_dim_names if n not in names],
            [n for n in self.out_dim_names if n not in names],
        )

    # ----------------------------------------------------------------- text form

    def __str__(self) -> str:
        def fmt(b: Basis) -> str:
            return str(b[0]) if len(b) == 1 else "(" + ",".join(str(x) for x in b) + ")"

        lines = [f"{name}: [{', '.join(fmt(b) for b in bases)}]" for name, bases in self.in_dims]
        outs = ", ".join(f"{name}={size}" for name, size in self.out_dims)
        return "\n".join([*lines, f"-> {outs}"])


__all__ = [
    "BLOCK",
    "LANE",
    "OFFSET",
    "REGISTER",
    "WARP",
    "Basis",
    "LinearLayout",
    "Vectorisation",
    "dim_names",
]
