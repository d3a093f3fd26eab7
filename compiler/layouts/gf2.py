"""Linear algebra over GF(2) on Python ints.

A vector of F2^n is an int whose bit k is coordinate k. Sums are XOR. Everything here is
exact and independent of n, so layouts of any size reuse the same helpers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence


def is_power_of_two(n: int) -> bool:
    """True for 1, 2, 4, ...; False for 0 and negatives."""
    return n > 0 and n & (n - 1) == 0


def log2_exact(n: int, what: str = "size") -> int:
    """log2 of a power of two; raises ValueError for anything else."""
    if not is_power_of_two(n):
        raise ValueError(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


def bit_indices(x: int) -> list[int]:
    """Positions of the set bits of x >= 0, ascending."""
    out = []
    k = 0
    while x:
        if x & 1:
            out.append(k)
        x >>= 1
        k += 1
    return out


def deposit(value: int, mask: int) -> int:
    """Scatter the low bits of value into the set positions of mask (pdep)."""
    out = 0
    for k in bit_indices(mask):
        if value & 1:
            out |= 1 << k
        value >>= 1
    return out


def extract(value: int, mask: int) -> int:
    """Gather the bits of value at the set positions of mask into the low bits (pext)."""
    out = 0
    for i, k in enumerate(bit_indices(mask)):
        if (value >> k) & 1:
            out |= 1 << i
    return out


def xor_combination(vectors: Sequence[int], selector: int) -> int:
    """XOR of vectors[k] over the set bits k of selector (a linear map applied to selector)."""
    out = 0
    k = 0
    while selector:
        if selector & 1:
            out ^= vectors[k]
        selector >>= 1
        k += 1
    return out


class XorBasis:
    """Incrementally built basis of a subspace of F2^n that remembers how it was built.

    Invariant: every stored row has a distinct leading bit (its pivot) and carries the set of
    inserted vectors (by insertion index) whose XOR it is. Only vectors that were independent
    of all earlier ones when inserted appear in those sets, so `express` solves a linear system
    with every free (dependent) column set to zero, preferring the earliest columns as pivots.
    """

    def __init__(self, vectors: Iterable[int] = ()) -> None:
        self._rows: dict[int, tuple[int, int]] = {}
        self._count = 0
        for v in vectors:
            self.insert(v)

    @property
    def rank(self) -> int:
        """Dimension of the spanned subspace."""
        return len(self._rows)

    @property
    def inserted(self) -> int:
        """Number of vectors inserted so far (independent or not)."""
        return self._count

    def reduce(self, v: int) -> tuple[int, int]:
        """(remainder, combination): v = remainder ⊕ XOR of inserted vectors in combination.

        The remainder is zero exactly when v lies in the span.
        """
        remainder = 0
        combination = 0
        while v:
            p = v.bit_length() - 1
            row = self._rows.get(p)
            if row is None:
                remainder |= 1 << p
                v ^= 1 << p
            else:
                v ^= row[0]
                combination ^= row[1]
        return remainder, combination

    def insert(self, v: int) -> bool:
        """Add v as the next column; True when it was independent of the earlier ones."""
        tag = 1 << self._count
        self._count += 1
        remainder, combination = self.reduce(v)
        if remainder == 0:
            return False
        self._rows[remainder.bit_length() - 1] = (remainder, combination ^ tag)
        return True

    def contains(self, v: int) -> bool:
        """True when v is in the span."""
        return self.reduce(v)[0] == 0

    def express(self, v: int) -> int | None:
        """Bit mask of inserted vectors whose XOR is v (free columns zero); None if not in span."""
        remainder, combination = self.reduce(v)
        return combination if remainder == 0 else None

    def copy(self) -> XorBasis:
        """An independent copy with the same rows and insertion count."""
        other = XorBasis()
        other._rows = dict(self._rows)
        other._count = self._count
        return other


def rank(vectors: Iterable[int]) -> int:
    """Dimension of span(vectors)."""
    return XorBasis(vectors).rank


def independent(vectors: Iterable[int]) -> list[int]:
    """The vectors that are independent of the ones before them, in order."""
    basis = XorBasis()
    return [v for v in vectors if basis.insert(v)]


def intersection_dim(a: Iterable[int], b: Iterable[int]) -> int:
    """dim(span(a) ∩ span(b)) = dim a + dim b − dim(a + b)."""
    a_list, b_list = list(a), list(b)
    return rank(a_list) + rank(b_list) - rank(a_list + b_list)


def span(vectors: Sequence[int]) -> Iterator[int]:
    """Every element of span(vectors) exactly once, ordered by combination of a basis."""
    basis = independent(vectors)
    for selector in range(1 << len(basis)):
        yield xor_combination(basis, selector)
