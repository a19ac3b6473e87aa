"""JAX versions of the paper's workloads: the optional ``jax.vmap (jit)`` column.

Imported only when JAX is installed (workloads.py checks). Each function takes the TF
workload's weights and inputs as numpy arrays and returns a zero-argument callable that
runs one jitted computation and waits for it: JAX dispatches asynchronously, so a timer
would otherwise stop before the work is done. The layouts are the TF code's: NHWC
images, HWIO filters, the LSTM's gates split in dynamic_lstm.lstm_step's order. Weights
are arguments of the jitted function, not closed-over constants, as tf.function
captures its tensors: XLA cannot fold them into the program.

- inference: ``jit(vmap(one_example))``;
- the dynamic LSTM: ``vmap`` of a ``lax.while_loop`` to the example's own length (vmap
  turns it into one loop to the longest length that masks finished rows);
- per-example gradients: ``jit(vmap(grad(loss_of_one_example), in_axes=(None, 0, 0)))``;
- jacobians: ``jit(jacrev(f))``, which is ``vmap`` of the backward pass over the rows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def _ready(fn, *args):
    args = jax.device_put(args)  # on the device before timing, as TF's constants are
    return lambda: jax.block_until_ready(fn(*args))


def _conv(image, kernel, padding):
    """tf.nn.conv2d (stride 1) of one [h, w, c] image with an HWIO kernel."""
    return lax.conv_general_dilated(image[None], kernel, (1, 1), padding,
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))[0]


def _max_pool(image):
    """2x2, stride 2, VALID: Keras' MaxPooling2D(2) and tf.nn.max_pool2d(h, 2, 2)."""
    return lax.reduce_window(image, -jnp.inf, lax.max, (2, 2, 1), (2, 2, 1), "VALID")


def _mnist_logits(params, image):
    k1, b1, k2, b2, w1, c1, w2, c2 = params  # model.trainable_variables' order
    h = _max_pool(jax.nn.relu(_conv(image, k1, "VALID") + b1))
    h = _max_pool(jax.nn.relu(_conv(h, k2, "VALID") + b2))
    h = jax.nn.relu(h.reshape(-1) @ w1 + c1)  # Flatten is row-major HWC; dropout is off
    return h @ w2 + c2


def _lstm_step(x_t, h, c, weights, bias):
    z = jnp.concatenate([x_t, h], -1) @ weights + bias
    f, g, o, u = jnp.split(z, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(u) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c), c


def _lstm_final_state(xs, weights, bias):
    """h after len(xs) steps; a static trip count, so reverse mode works (a scan)."""
    def step(t, hc):
        return _lstm_step(xs[t], *hc, weights, bias)

    zeros = jnp.zeros([weights.shape[1] // 4], xs.dtype)
    return lax.fori_loop(0, xs.shape[0], step, (zeros, zeros))[0]


def _xent(logits, label):
    return jax.nn.logsumexp(logits) - logits[label]


# --- auto-batching inference ---------------------------------------------------------

def linear(x, w):
    return _ready(jax.jit(jax.vmap(lambda xi, w: xi @ w, in_axes=(0, None))), x, w)


def mnist(params, images):
    return _ready(jax.jit(jax.vmap(_mnist_logits, in_axes=(None, 0))), params, images)


def dynamic_lstm(inputs, lengths, weights, bias):
    def one(x, steps, weights, bias):
        def step(carry):
            t, h, c = carry
            return (t + 1, *_lstm_step(x[t], h, c, weights, bias))

        zeros = jnp.zeros([weights.shape[1] // 4], x.dtype)
        return lax.while_loop(lambda carry: carry[0] < steps, step,
                              (jnp.int32(0), zeros, zeros))[1]

    fn = jax.jit(jax.vmap(one, in_axes=(0, 0, None, None)))
    return _ready(fn, inputs, lengths, weights, bias)


# --- per-example gradients -----------------------------------------------------------

def _per_example_gradients(loss, params, xs, ys):
    return _ready(jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))), params, xs, ys)


def mnist_gradients(params, images, labels):
    def loss(params, image, label):
        return _xent(_mnist_logits(params, image), label)

    return _per_example_gradients(loss, list(params), images, labels)


def lstm_gradients(params, xs, labels):
    def loss(params, x, label):
        weights, bias, out = params
        return _xent(_lstm_final_state(x, weights, bias) @ out, label)

    return _per_example_gradients(loss, list(params), xs, labels)


# --- jacobians -----------------------------------------------------------------------

def vgg_jacobian(filters, head, image):
    """``filters``: HWIO kernels (conv 3x3 SAME, relu), None for a 2x2 max-pool."""
    def net(image, filters, head):
        h = image
        for kernel in filters:
            h = _max_pool(h) if kernel is None else jax.nn.relu(_conv(h, kernel, "SAME"))
        return h.reshape(-1) @ head

    return _ready(jax.jit(jax.jacrev(net)), image, list(filters), head)


def lstm_jacobian(weights, bias, head, xs):
    def net(xs, weights, bias, head):
        return _lstm_final_state(xs, weights, bias) @ head

    return _ready(jax.jit(jax.jacrev(net)), xs, weights, bias, head)
