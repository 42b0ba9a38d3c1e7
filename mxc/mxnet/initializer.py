"""``mx.init``: the initializers Gluon's ``initialize()`` uses (numpy's generator)."""

from __future__ import annotations

import numpy as np

__all__ = ["Initializer", "Uniform", "Normal", "Zero", "One", "Constant", "Xavier"]


class Initializer:
    """Fills an NDArray in place: ``init(name, arr)``."""

    def __call__(self, name, arr) -> None:
        arr._data[...] = self._values(arr.shape).astype(arr._data.dtype)

    def _values(self, shape) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Uniform(Initializer):
    def __init__(self, scale: float = 0.07):
        self.scale = scale

    def _values(self, shape):
        return np.random.uniform(-self.scale, self.scale, shape)


class Normal(Initializer):
    def __init__(self, sigma: float = 0.01):
        self.sigma = sigma

    def _values(self, shape):
        return np.random.normal(0, self.sigma, shape)


class Constant(Initializer):
    def __init__(self, value: float):
        self.value = value

    def _values(self, shape):
        return np.full(shape, self.value)


class Zero(Constant):
    def __init__(self):
        super().__init__(0.0)


class One(Constant):
    def __init__(self):
        super().__init__(1.0)


class Xavier(Initializer):
    """Uniform Xavier/Glorot: ``U(-s, s)``, ``s = sqrt(magnitude / mean(fan_in, fan_out))``."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg",
                 magnitude: float = 3.0):
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, magnitude

    def _values(self, shape):
        if len(shape) < 2:
            return np.random.uniform(-0.07, 0.07, shape)
        hw = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * hw, shape[0] * hw
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = np.sqrt(self.magnitude / factor)
        if self.rnd_type == "gaussian":
            return np.random.normal(0, scale, shape)
        return np.random.uniform(-scale, scale, shape)
