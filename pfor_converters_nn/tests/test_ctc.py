"""CTC against the loop, with no fallback (ctc.py): the CTCLoss op (loss and gradient)
for every layout of logits, sparse labels (invariant, stacked, ragged) and lengths;
tf.nn.ctc_loss on dense labels (a Defun while loop) and on sparse ones; the greedy and
beam search decoders, whose sparse results come out ragged."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

# labels_indices / labels_values: R ragged (a count per iteration), S stacked (one
# count), U invariant.
LABEL_LAYOUTS = ["RR", "US", "UU", "SU", "SS"]


def ctc_problem(data, *, min_classes=3):
    """n, time, batch, classes, label width, the logits [n, T, B, C] and per-iteration
    sequence lengths [n, B] long enough for any label of that width."""
    n = data.draw(st.integers(0, 3), label="n")
    batch = data.draw(st.integers(1, 3), label="batch")
    classes = data.draw(st.integers(min_classes, 5), label="classes")
    width = data.draw(st.integers(0, 2), label="label width")
    time = 2 * width + 1 + data.draw(st.integers(0, 2), label="spare time")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    # One row more than n: invariant operands are row 0 even when n is 0.
    logits = tf.constant(rng.standard_normal([n + 1, time, batch, classes]), tf.float32)
    lengths = tf.constant(rng.integers(2 * width + 1, time + 1, size=[n + 1, batch]), tf.int32)
    return n, time, batch, classes, width, rng, logits, lengths


def pick(data, label):
    return data.draw(st.booleans(), label=label)


@settings(max_examples=15)
@given(st.data())
def test_ctc_loss_op_every_layout(data):
    n, _, batch, classes, width, rng, logits, lengths = ctc_problem(data)
    layout = data.draw(st.sampled_from(LABEL_LAYOUTS), label="labels")
    logits_stacked, lengths_stacked = pick(data, "logits stacked"), pick(data, "lengths stacked")
    if not (logits_stacked or lengths_stacked or "S" in layout or "R" in layout):
        logits_stacked = True
    # The kernel wants at least one label per batch entry.
    width = max(width, 1)
    table = tf.constant(rng.integers(0, classes - 1, size=[n + 1, batch, width]), tf.int32)
    counts = tf.constant(rng.integers(1, width + 1, size=[n + 1, batch]), tf.int32)
    # Stacked indices: each iteration's own positions, the same number of them (the
    # label lengths of the batch entries permuted).
    base = rng.integers(1, width + 1, size=batch)
    index_table = tf.constant(np.stack([
        [[b, t] for b, c in enumerate(rng.permutation(base)) for t in range(c)]
        for _ in range(n + 1)]), tf.int64)
    value_table = tf.constant(rng.integers(0, classes - 1, size=[n + 1, int(base.sum())]),
                              tf.int32)
    attrs = dict(preprocess_collapse_repeated=pick(data, "collapse"),
                 ctc_merge_repeated=pick(data, "merge"))

    def labels(i):
        if layout == "RR":
            mask = tf.range(width) < counts[i][:, None]
            return tf.where(mask), tf.boolean_mask(table[i], mask)
        indices = index_table[i if layout[0] == "S" else 0]
        return indices, value_table[i if layout[1] == "S" else 0]

    def body(i):
        indices, values = labels(i)
        return tuple(tf.raw_ops.CTCLoss(
            inputs=logits[i if logits_stacked else 0], labels_indices=indices,
            labels_values=values, sequence_length=lengths[i if lengths_stacked else 0],
            **attrs))

    testing.assert_matches_loop(body, n, graph=pick(data, "graph"), rtol=1e-5, atol=1e-5)


def test_ctc_loss_op_batch_index_out_of_range_fails_like_the_loop():
    logits = tf.zeros([2, 4, 2, 3])
    indices = tf.constant([[[0, 0], [1, 0]], [[0, 0], [2, 0]]], tf.int64)  # 2 >= batch
    testing.assert_fails_like_loop(
        lambda i: tf.raw_ops.CTCLoss(inputs=logits[i], labels_indices=indices[i],
                                     labels_values=tf.constant([1, 1]),
                                     sequence_length=tf.constant([4, 4]))[0], 2)


@settings(max_examples=6)
@given(st.data())
def test_ctc_loss_dense_labels(data):
    """tf.nn.ctc_loss with dense labels: a scan in a Defun While, converted whole."""
    n, _, batch, classes, width, rng, logits, lengths = ctc_problem(data)
    blank = data.draw(st.sampled_from([0, -1]), label="blank")
    low = 1 if blank == 0 else 0
    labels = tf.constant(rng.integers(low, classes - 1 + low, size=[n, batch, max(width, 1)]),
                         tf.int32)
    label_lengths = tf.constant(rng.integers(0, width + 1, size=[n, batch]), tf.int32)
    time_major = pick(data, "time major")
    stacked = [pick(data, "logits stacked"), pick(data, "labels stacked")]

    def body(i):
        x = logits[i if stacked[0] else 0]
        if not time_major:
            x = tf.transpose(x, [1, 0, 2])
        return tf.nn.ctc_loss(labels[i if stacked[1] else 0], x, label_lengths[i], lengths[i],
                              logits_time_major=time_major, blank_index=blank)

    if n == 0:
        return
    testing.assert_matches_loop(body, n, graph=pick(data, "graph"), rtol=1e-5, atol=1e-5)


def test_ctc_loss_dense_labels_gradient():
    """Per-example gradients through the scan's custom gradient."""
    rng = np.random.default_rng(3)
    logits = tf.constant(rng.standard_normal([3, 5, 2, 4]), tf.float32)
    labels = tf.constant([[[1, 2], [3, 0]], [[2, 2], [1, 1]], [[3, 1], [0, 0]]])
    label_lengths = tf.constant([[2, 1], [2, 2], [2, 0]])

    def body(i):
        x = logits[i]
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.nn.ctc_loss(labels[i], x, label_lengths[i], [5, 4],
                                                logits_time_major=True))
        return loss, tape.gradient(loss, x)

    testing.assert_matches_loop(body, 3, rtol=1e-5, atol=1e-5)


@settings(max_examples=8)
@given(st.data())
def test_ctc_loss_sparse_labels(data):
    """tf.nn.ctc_loss and tf.compat.v1.nn.ctc_loss on per-iteration sparse labels."""
    n, _, batch, classes, width, rng, logits, lengths = ctc_problem(data)
    width = max(width, 1)  # the kernel wants at least one label per batch entry
    base = rng.integers(1, width + 1, size=batch)
    indices = tf.constant([[b, t] for b, c in enumerate(base) for t in range(c)], tf.int64)
    values = tf.constant(rng.integers(0, classes - 1, size=[n, int(base.sum())]), tf.int32)
    v1 = pick(data, "v1")

    def body(i):
        labels = tf.SparseTensor(indices, values[i], [batch, width])
        if v1:
            return tf.compat.v1.nn.ctc_loss(labels, logits[i], lengths[i])
        return tf.nn.ctc_loss(labels, logits[i], None, lengths[i], logits_time_major=True,
                              blank_index=-1)

    testing.assert_matches_loop(body, n, graph=pick(data, "graph"), rtol=1e-5, atol=1e-5)


@settings(max_examples=15)
@given(st.data())
def test_decoders(data):
    n, _, _, _, _, _, logits, lengths = ctc_problem(data, min_classes=2)
    stacked = [pick(data, "logits stacked"), pick(data, "lengths stacked")]
    if not any(stacked):
        stacked[0] = True
    beam = pick(data, "beam")
    merge = pick(data, "merge")
    top_paths = data.draw(st.integers(1, 3), label="top paths")

    def body(i):
        x, seq = logits[i if stacked[0] else 0], lengths[i if stacked[1] else 0]
        if beam:
            decoded, log_prob = tf.nn.ctc_beam_search_decoder(x, seq, beam_width=3,
                                                              top_paths=top_paths)
        else:
            decoded, log_prob = tf.compat.v1.nn.ctc_greedy_decoder(x, seq, merge_repeated=merge)
        return [(d.indices, d.values, d.dense_shape) for d in decoded], log_prob

    testing.assert_matches_loop(body, n, graph=pick(data, "graph"), ragged_outputs=True,
                                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("beam", [False, True])
def test_decoded_paths_padded(beam):
    """The usual end of decoding: each path as a dense [batch, longest] tensor (ragged
    across iterations, through SparseToDense)."""
    rng = np.random.default_rng(1)
    logits = tf.constant(rng.standard_normal([4, 7, 3, 4]), tf.float32)
    lengths = tf.constant(rng.integers(1, 8, size=[4, 3]), tf.int32)

    def body(i):
        if beam:
            decoded, _ = tf.nn.ctc_beam_search_decoder(logits[i], lengths[i], beam_width=2,
                                                       top_paths=2)
        else:
            decoded, _ = tf.nn.ctc_greedy_decoder(logits[i], lengths[i])
        return [tf.sparse.to_dense(d, default_value=-1) for d in decoded]

    testing.assert_matches_loop(body, 4, graph=True, ragged_outputs=True)


def test_decoder_with_blank_first_and_its_padded_lengths():
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.standard_normal([4, 6, 3, 5]), tf.float32)
    lengths = tf.constant(rng.integers(0, 7, size=[4, 3]), tf.int32)

    def body(i):
        decoded, log_prob = tf.nn.ctc_greedy_decoder(logits[i], lengths[i], blank_index=0)
        sparse = decoded[0]
        per_entry = tf.math.bincount(tf.cast(sparse.indices[:, 0], tf.int32), minlength=3,
                                     maxlength=3)
        return per_entry, sparse.dense_shape, log_prob

    testing.assert_matches_loop(body, 4, graph=True)
