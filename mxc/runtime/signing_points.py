"""Which Ed25519 public keys are degenerate: small order, mixed order, non-canonical.

A public key is a point A of the curve.  Verification checks
``[S]B == R + [k]A``; when A has small order (the identity is the extreme
case: ``[k]A`` is the identity for every k), a signature ``R = identity,
S = 0`` -- or a handful of others -- verifies *every* message, and the
underlying library does not refuse such keys.  No honestly generated key is
one of them: a real key is ``[a]B`` for a secret scalar a, a point of the
prime-order subgroup, encoded canonically.  So a verify key must decode
canonically to a point of order exactly L (the subgroup's prime order);
anything else is refused before it verifies anything.

Pure integer arithmetic over GF(2**255 - 19) in extended twisted Edwards
coordinates (a = -1); a few hundred point operations per check.
"""

from __future__ import annotations

__all__ = ["degenerate_reason"]

_P = 2 ** 255 - 19
_L = 2 ** 252 + 27742317777372353535851937790883648493
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_IDENTITY = (0, 1, 1, 0)


def _decode(raw: bytes) -> tuple[int, int] | str:
    """The affine point of a 32-byte encoding, or why it is not a canonical one."""
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    sign = raw[31] >> 7
    if y >= _P:
        return "a non-canonical encoding (y is not reduced modulo 2**255 - 19)"
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return "not a point of the curve"
    if x == 0 and sign:
        return "a non-canonical encoding (x = 0 with the sign bit set)"
    if x & 1 != sign:
        x = _P - x
    return x, y


def _add(p, q):
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % _P
    b = (y1 + x1) * (y2 + x2) % _P
    c = 2 * t1 * t2 * _D % _P
    d = 2 * z1 * z2 % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _times(n: int, point):
    result, addend = _IDENTITY, point
    while n:
        if n & 1:
            result = _add(result, addend)
        addend = _add(addend, addend)
        n >>= 1
    return result


def _is_identity(point) -> bool:
    x, y, z, _ = point
    return x % _P == 0 and (y - z) % _P == 0


def degenerate_reason(raw: bytes) -> str | None:
    """Why the 32-byte public key *raw* must not be trusted, or None for a sound key."""
    if len(raw) != 32:
        return f"{len(raw)} bytes, not 32"
    decoded = _decode(raw)
    if isinstance(decoded, str):
        return decoded
    x, y = decoded
    point = (x, y, 1, x * y % _P)
    if _is_identity(_times(8, point)):
        return ("a point of small order (the identity or a torsion point), which would "
                "accept forged signatures")
    if not _is_identity(_times(_L, point)):
        return "a point outside the prime-order subgroup (it has a torsion component)"
    return None
