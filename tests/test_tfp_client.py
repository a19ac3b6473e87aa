"""TensorFlow Probability as a client (issue 33): what a TFP user does with pfor.

Optional: skipped unless tensorflow_probability (and tf_keras, which it needs) import.
Distributions are composite tensors with a batchable type spec, so a body may return
them and ``elems`` may hold them; TFP's auto-batched joint distributions call
``tf.vectorized_map`` and TensorFlow's private ``pfor``, here pointed at pfor's, and
must give what they give on TensorFlow's vectorizer. Everything is compared with
``tf.vectorized_map`` (or with TFP run on it), with ``fallback="error"``.
"""

import pytest
import tensorflow as tf

pytest.importorskip("tf_keras")
tfp = pytest.importorskip("tensorflow_probability")

import pfor_core as pf  # noqa: E402
from pfor_core import testing  # noqa: E402

tfd = tfp.distributions
X = tf.reshape(tf.range(12.0), [4, 3]) / 4.0 - 1.0


def assert_same_normal(got, want):
    assert type(got) is type(want), (type(got), type(want))
    assert got.batch_shape == want.batch_shape
    testing.assert_allclose(got.loc, want.loc)
    testing.assert_allclose(got.scale, want.scale)


def test_body_returning_a_distribution_per_example():
    def fn(row):
        return tfd.Normal(loc=row, scale=tf.exp(row))

    got = pf.vectorized_map(fn, X, fallback="error")
    want = tf.vectorized_map(fn, X)
    assert_same_normal(got, want)
    testing.assert_allclose(got.log_prob(0.5), want.log_prob(0.5))
    inside = tf.function(lambda x: pf.vectorized_map(fn, x, fallback="error").mean(),
                         input_signature=[tf.TensorSpec([None, 3])], autograph=False)
    testing.assert_allclose(inside(X), X)


def test_distributions_mapped_over_and_log_prob_per_example():
    batch = tfd.Normal(loc=X, scale=tf.nn.softplus(X) + 0.1)

    def from_batch(d):
        return d.log_prob(tf.zeros([3]))

    testing.assert_allclose(pf.vectorized_map(from_batch, batch, fallback="error"),
                            tf.vectorized_map(from_batch, batch))

    def built(row):  # a distribution made inside the body from the example
        d = tfd.MultivariateNormalDiag(loc=row[:2], scale_diag=tf.nn.softplus(row[1:]))
        return d.log_prob(row[::-1][:2]), d.entropy()

    testing.assert_same_results(pf.vectorized_map(built, X, fallback="error"),
                                tf.vectorized_map(built, X))


def model():
    scale = yield tfd.HalfNormal(1.0, name="scale")
    loc = yield tfd.Normal(0.0, 1.0, name="loc")
    yield tfd.Normal(loc * tf.ones([3]), scale, name="x")


def sample_and_score(model_fn):
    joint = tfd.JointDistributionCoroutineAutoBatched(model_fn)
    dists, xs = joint.sample_distributions(4, seed=(1, 2))
    return dists, xs, joint.log_prob(xs)


def point_at_pfor(monkeypatch) -> list:
    """TFP's calls of tf.vectorized_map and of TensorFlow's pfor, made with pfor's from
    now on (until the test ends); the list records them."""
    from tensorflow_probability.python.internal import vectorization_util

    calls = []

    def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):  # pylint: disable=unused-argument
        calls.append("vectorized_map")
        return pf.vectorized_map(fn, elems, fallback="error")

    def pfor(loop_fn, iters, fallback_to_while_loop=True, parallel_iterations=None):  # pylint: disable=unused-argument
        calls.append("pfor")
        return pf.pfor(loop_fn, iters, fallback="error",
                       parallel_iterations=parallel_iterations)

    monkeypatch.setattr(vectorization_util.tf, "vectorized_map", vectorized_map)
    monkeypatch.setattr(vectorization_util.control_flow_ops, "pfor", pfor)
    return calls


@pytest.mark.filterwarnings("ignore:Saw Tensor seed")
def test_joint_distribution_auto_batched_sample_distributions(monkeypatch):
    """Samples of 4 draws: each draw's distributions are returned from the body
    (``sample_distributions``), and the log-density goes through vectorized_map."""
    want_dists, want_xs, want_lp = sample_and_score(model)
    calls = point_at_pfor(monkeypatch)
    got_dists, got_xs, got_lp = sample_and_score(model)
    assert set(calls) == {"pfor", "vectorized_map"}, calls
    testing.assert_same_results(tuple(got_xs), tuple(want_xs))
    testing.assert_allclose(got_lp, want_lp)
    for got, want in zip(got_dists, want_dists):
        assert type(got) is type(want) and got.batch_shape == want.batch_shape
        testing.assert_allclose(got.mean(), want.mean())


def test_rank_polymorphic_function_with_parts_of_no_rank(monkeypatch):
    """make_rank_polymorphic's body returns None for parts that have none: they come
    back as None."""
    from tensorflow_probability.python.internal import vectorization_util

    def fn(x, y):
        return {"dot": tf.reduce_sum(x * y), "none": None}

    polymorphic = vectorization_util.make_rank_polymorphic(fn, core_ndims=(1, 1))
    want = polymorphic(X, X[::-1])
    calls = point_at_pfor(monkeypatch)
    got = polymorphic(X, X[::-1])
    assert calls == ["vectorized_map"]
    assert got["none"] is None and want["none"] is None
    testing.assert_allclose(got["dot"], want["dot"])


class Opaque(tfd.Distribution):
    """A user's distribution that is no CompositeTensor."""

    def __init__(self, loc):
        parameters = dict(locals())
        self._loc = tf.convert_to_tensor(loc)
        super().__init__(dtype=tf.float32, reparameterization_type=tfd.FULLY_REPARAMETERIZED,
                         validate_args=False, allow_nan_stats=True, parameters=parameters)

    @classmethod
    def _parameter_properties(cls, dtype, num_classes=None):  # pylint: disable=unused-argument
        return {"loc": tfp.util.ParameterProperties()}

    def _event_shape(self):
        return tf.TensorShape([])

    def _batch_shape(self):
        return self._loc.shape

    def _sample_n(self, n, seed=None):
        return self._loc + tf.random.stateless_normal(
            tf.concat([[n], tf.shape(self._loc)], 0), seed=tfp.random.sanitize_seed(seed))

    def _log_prob(self, x):
        return -0.5 * tf.square(x - self._loc)


def opaque_model():
    loc = yield tfd.Normal(0.0, 1.0, name="loc")
    yield Opaque(loc)


@pytest.mark.filterwarnings("ignore:Saw Tensor seed")
def test_non_composite_distribution_gets_tfps_advice(monkeypatch):
    """TFP turns TensorFlow's "Failed to convert elements" into its advice; pfor's
    error keeps that phrase, so TFP gives the same advice."""
    advice = r"not `CompositeTensor`s.*use_vectorized_map=False"
    with pytest.raises(TypeError, match=advice):
        sample_and_score(opaque_model)
    point_at_pfor(monkeypatch)
    with pytest.raises(TypeError, match=advice):
        sample_and_score(opaque_model)
