"""The small CNN the training and tf.distribute tests train: Conv2D -> DepthwiseConv2D
-> 1x1 Conv2D -> global average pooling -> Dense, built from either Keras' layers or
tf_conv_backprop.keras' (same arguments), with seeded weights and data, trained by
plain SGD on a mean squared error. Also run as a script by the distribute tests'
worker processes (see test_distribute.py)."""
import numpy as np
import tensorflow as tf

HW = (8, 8)
CHANNELS = 3
BATCH = 8
STEPS = 20
LEARNING_RATE = 0.1


def layer_module(ours):
    if ours:
        import tf_conv_backprop.keras as tcb_keras
        return tcb_keras
    return tf.keras.layers


def build(ours, data_format="channels_last", dtype="float32", dilation=1, dw_strides=1,
          seed=0):
    """The CNN; the same seed gives the same weights whichever layers are used."""
    keras = tf.keras
    conv = layer_module(ours)
    shape = HW + (CHANNELS,) if data_format == "channels_last" else (CHANNELS,) + HW
    common = dict(data_format=data_format, dtype=dtype)
    model = keras.Sequential([
        keras.Input(shape, dtype=dtype),
        conv.Conv2D(4, 3, padding="same", dilation_rate=dilation, activation="tanh", **common),
        conv.DepthwiseConv2D(3, strides=dw_strides, padding="same", depth_multiplier=2,
                             dilation_rate=dilation, activation="tanh", **common),
        conv.Conv2D(3, 1, **common),
        keras.layers.GlobalAveragePooling2D(**common),
        keras.layers.Dense(2, dtype=dtype),
    ])
    rng = np.random.default_rng(seed)
    model.set_weights([0.4 * rng.standard_normal(w.shape) for w in model.get_weights()])
    return model


def data(data_format="channels_last", dtype="float32", seed=1, batch=BATCH):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch,) + HW + (CHANNELS,))
    if data_format == "channels_first":
        x = x.transpose(0, 3, 1, 2)
    y = rng.standard_normal((batch, 2))
    return tf.constant(x, dtype), tf.constant(y, dtype)


def _loss(model, x, y, global_batch):
    per_example = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=1)
    return tf.reduce_sum(per_example) / tf.cast(global_batch, per_example.dtype)


def train(model, x, y, steps=STEPS):
    """SGD on the whole batch; returns (losses, final weights)."""
    optimizer = tf.keras.optimizers.SGD(LEARNING_RATE)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = _loss(model, x, y, x.shape[0])
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    losses = [float(step()) for _ in range(steps)]
    return losses, [np.array(w) for w in model.get_weights()]


def train_distributed(strategy, ours=True, dtype="float32", steps=STEPS, **build_args):
    """The same training under a tf.distribute strategy: the global batch is split
    evenly over the replicas (replica i takes rows i*k .. (i+1)*k-1, in every worker
    process); gradients are all-reduced by the optimizer."""
    x, y = data(dtype=dtype)
    with strategy.scope():
        model = build(ours, dtype=dtype, **build_args)
        optimizer = tf.keras.optimizers.SGD(LEARNING_RATE)
    per_replica = BATCH // strategy.num_replicas_in_sync

    def shard(ctx):
        i = ctx.replica_id_in_sync_group
        return x[i * per_replica:(i + 1) * per_replica], y[i * per_replica:(i + 1) * per_replica]

    xs, ys = strategy.experimental_distribute_values_from_function(shard)

    def replica_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = _loss(model, xb, yb, BATCH)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    @tf.function
    def step(xb, yb):
        losses = strategy.run(replica_step, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    losses = [float(step(xs, ys)) for _ in range(steps)]
    return losses, [np.array(w) for w in model.get_weights()]


# Distributed runs, as separate processes (tf.distribute set-up must precede TF's
# initialisation): `python cnn.py mirrored OUT.npz [EXAMPLE.py]` trains under
# MirroredStrategy over two logical CPU devices; `python cnn.py worker OUT.npz
# [EXAMPLE.py]` is one worker of a MultiWorkerMirroredStrategy cluster described by
# TF_CONFIG. Both write the final weights and losses to OUT.npz. With EXAMPLE.py (the
# README's mirrored.py / worker.py), that example runs first, as written, and its
# `strategy` is reused: the README's distributed examples are checked in the same
# processes.
DISTRIBUTED_BUILD = dict(dtype="float64", dilation=2)


def _main(mode, out, example=None):
    if example:
        import runpy
        strategy = runpy.run_path(example, run_name="__main__")["strategy"]
    elif mode == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    elif mode == "worker":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    expected = (tf.distribute.MirroredStrategy if mode == "mirrored"
                else tf.distribute.MultiWorkerMirroredStrategy)
    assert isinstance(strategy, expected), strategy
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    losses, weights = train_distributed(strategy, **DISTRIBUTED_BUILD)
    np.savez(out, losses=np.array(losses), **{f"w{i}": w for i, w in enumerate(weights)})


if __name__ == "__main__":
    import sys
    _main(*sys.argv[1:])
