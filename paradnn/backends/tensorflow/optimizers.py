"""paradnn's optimizers in TensorFlow for the TensorFlow backend: ``paradnn.backends.jax.step.
make_optimizer``'s optax chains, term by term, as tf.Variables updated in place inside the
compiled step (:mod:`paradnn.backends.tensorflow.backend` builds and compiles the step)."""

from __future__ import annotations

from typing import Any

from paradnn.errors import SpecError
from paradnn.sizes import optimizer as optimizer_entry


def _tf():
    # TensorFlow as the backend starts it (Keras on TensorFlow, thread pools sized): imported
    # at call time, since the backend imports this module.
    from paradnn.backends.tensorflow.backend import start_tf as start

    return start()


class Optimizer:
    """Slots created by :meth:`build` (tf.Variables, float32 like the parameters); :meth:`apply`
    updates the parameters in place inside the compiled step."""

    def __init__(self) -> None:
        self.slots: list[Any] = []

    def _slot(self, shape, name: str, dtype: str = "float32"):
        tf = _tf()
        v = tf.Variable(tf.zeros(shape, dtype), trainable=False, name=name)
        self.slots.append(v)
        return v

    def build(self, params: list) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def apply(self, grads: list, params: list) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class SGD(Optimizer):
    """optax.sgd(lr, momentum): with momentum m = g + momentum * m; p -= lr * m."""

    def __init__(self, lr: float, momentum: float | None = None) -> None:
        super().__init__()
        self.lr, self.momentum = lr, momentum

    def build(self, params):
        self.m = [self._slot(p.shape, "momentum") for p in params] if self.momentum else []

    def apply(self, grads, params):
        for i, (g, p) in enumerate(zip(grads, params)):
            if self.momentum:
                g = self.m[i].assign(g + self.momentum * self.m[i])
            p.assign_sub(self.lr * g)


class RMSprop(Optimizer):
    """optax.rmsprop(lr, decay, eps, momentum, eps_in_sqrt=True): nu = decay*nu + (1-decay)*g^2;
    u = g / sqrt(nu + eps) (epsilon INSIDE the square root, TF1's RMSProp; Keras 3's RMSprop
    adds it outside, so it is not used); m = u + momentum * m; p -= lr * m."""

    def __init__(self, lr: float, decay: float, eps: float, momentum: float) -> None:
        super().__init__()
        self.lr, self.decay, self.eps, self.momentum = lr, decay, eps, momentum

    def build(self, params):
        self.nu = [self._slot(p.shape, "nu") for p in params]
        self.m = [self._slot(p.shape, "momentum") for p in params]

    def apply(self, grads, params):
        tf = _tf()
        for g, p, nu, m in zip(grads, params, self.nu, self.m):
            n = nu.assign(self.decay * nu + (1.0 - self.decay) * tf.square(g))
            u = g * tf.math.rsqrt(n + self.eps)
            p.assign_sub(self.lr * m.assign(u + self.momentum * m))


class Adam(Optimizer):
    """optax.adam(lr): b1 0.9, b2 0.999, eps 1e-8 outside the root, bias-corrected moments."""

    def __init__(self, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> None:
        super().__init__()
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

    def build(self, params):
        self.count = self._slot((), "count", "int32")
        self.mu = [self._slot(p.shape, "mu") for p in params]
        self.nu = [self._slot(p.shape, "nu") for p in params]

    def apply(self, grads, params):
        tf = _tf()
        t = tf.cast(self.count.assign_add(1), tf.float32)
        c1, c2 = 1.0 - tf.pow(self.b1, t), 1.0 - tf.pow(self.b2, t)
        for g, p, mu, nu in zip(grads, params, self.mu, self.nu):
            m = mu.assign(self.b1 * mu + (1.0 - self.b1) * g)
            v = nu.assign(self.b2 * nu + (1.0 - self.b2) * tf.square(g))
            p.assign_sub(self.lr * (m / c1) / (tf.sqrt(v / c2) + self.eps))


class Adafactor(Optimizer):
    """optax.adafactor(lr) with its defaults: factored second moments for parameters whose two
    largest dimensions are >= 128 (decay 1 - (t+1)^-0.8, epsilon 1e-30 added to g^2), update
    clipped to block RMS 1, scaled by lr and by max(RMS(param), 1e-3), no momentum. Keras's
    Adafactor differs (relative step sizes, other factoring rule), so it is not used."""

    MIN_DIM_TO_FACTOR, DECAY, EPS, CLIP, MIN_SCALE = 128, 0.8, 1e-30, 1.0, 1e-3

    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr

    @classmethod
    def factored_dims(cls, shape) -> tuple[int, int] | None:
        """(second largest, largest) axes of a factored parameter, as optax sorts them."""
        shape = tuple(int(d) for d in shape)
        if len(shape) < 2:
            return None
        order = sorted(range(len(shape)), key=lambda i: shape[i])  # stable, like numpy argsort
        if shape[order[-2]] < cls.MIN_DIM_TO_FACTOR:
            return None
        return order[-2], order[-1]

    def build(self, params):
        self.count = self._slot((), "count", "int32")
        self.stats = []
        for p in params:
            shape = tuple(int(d) for d in p.shape)
            dims = self.factored_dims(shape)
            if dims is None:
                self.stats.append((None, self._slot(shape, "v")))
            else:
                d1, d0 = dims
                row = tuple(s for i, s in enumerate(shape) if i != d0)
                col = tuple(s for i, s in enumerate(shape) if i != d1)
                self.stats.append((dims, (self._slot(row, "v_row"), self._slot(col, "v_col"))))

    def apply(self, grads, params):
        tf = _tf()
        t = tf.cast(self.count + 1, tf.float32)  # optax: decay from the count before the step
        decay = 1.0 - tf.pow(t, -self.DECAY)
        self.count.assign_add(1)
        for g, p, (dims, v) in zip(grads, params, self.stats):
            g2 = tf.square(g) + self.EPS
            if dims is None:
                nv = v.assign(decay * v + (1.0 - decay) * g2)
                u = g * tf.math.rsqrt(nv)
            else:
                d1, d0 = dims
                v_row, v_col = v
                row = v_row.assign(decay * v_row + (1.0 - decay) * tf.reduce_mean(g2, axis=d0))
                col = v_col.assign(decay * v_col + (1.0 - decay) * tf.reduce_mean(g2, axis=d1))
                reduced_d1 = d1 - 1 if d1 > d0 else d1
                row_factor = tf.math.rsqrt(row / tf.reduce_mean(row, axis=reduced_d1, keepdims=True))
                u = g * tf.expand_dims(row_factor, d0) * tf.expand_dims(tf.math.rsqrt(col), d1)
            u = u / tf.maximum(1.0, tf.sqrt(tf.reduce_mean(tf.square(u))) / self.CLIP)
            scale = tf.maximum(tf.sqrt(tf.reduce_mean(tf.square(p))), self.MIN_SCALE)
            p.assign_sub(self.lr * u * scale)


def make_optimizer(name: str) -> Optimizer:
    """The optimizer a workload names, with the hyperparameters of its row in
    ``paradnn.sizes.OPTIMIZERS`` (the settings every framework reads)."""
    o = optimizer_entry(name)
    if o.algorithm == "rmsprop":
        return RMSprop(o.learning_rate, decay=o.decay, eps=o.epsilon, momentum=o.momentum)
    if o.algorithm == "sgd":
        return SGD(o.learning_rate, momentum=o.momentum)
    if o.algorithm == "adam":
        return Adam(o.learning_rate, b1=o.beta1, b2=o.beta2, eps=o.epsilon)
    if o.algorithm == "adafactor":
        # Adafactor reads its settings as class attributes (factored_dims is a classmethod).
        tabled = type("Adafactor", (Adafactor,), {
            "MIN_DIM_TO_FACTOR": o.factor_min_dim, "DECAY": o.decay_rate, "EPS": o.epsilon,
            "CLIP": o.clipping_threshold, "MIN_SCALE": o.min_scale})
        return tabled(o.learning_rate)
    raise SpecError("optimizer", name, f"an optimizer whose algorithm TensorFlow implements ({o.algorithm} is not)")


__all__ = ["Adafactor", "Adam", "Optimizer", "RMSprop", "SGD", "make_optimizer"]
