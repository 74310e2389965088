"""Checks of the NumPy oracle (tests/reference.py) against TensorFlow's own kernels.

Facts about TF 2.21 on CPU (oneDNN on) that shape these tests:
  * float64 Conv2DBackpropInput/Filter run the Eigen/custom kernels, which reject
    dilation > 1 and NCHW; oneDNN handles those only for float32.  Dilated conv2d
    gradients are therefore checked (a) against the float32 oneDNN kernels, and
    (b) in float64 against autodiff of tf.nn.convolution / the forward op plus the
    adjoint identity.
  * The oneDNN float32 path does not take EXPLICIT padding: such calls fall back to the
    custom kernels and fail for dilation > 1 / NCHW, so those tests draw SAME/VALID only;
    dilated EXPLICIT gradients are covered by the forward check plus the adjoint identity.
  * DepthwiseConv2dNativeBackprop* silently ignore `dilations`, so dilated depthwise is
    checked against autodiff of tf.nn.depthwise_conv2d (space_to_batch, stride 1) and
    by the adjoint identity.
"""
import numpy as np
import pytest
import tensorflow as tf

from reference import (conv2d_backprop_filter, conv2d_backprop_input,
                       depthwise_backprop_filter, depthwise_backprop_input,
                       forward_conv2d, output_size)

TOL64 = 1e-12
TOL32 = 1e-5          # float32 TF kernels vs float64 oracle on float32-representable data


def rel_err(ref, got):
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    assert ref.shape == got.shape, (ref.shape, got.shape)
    den = np.linalg.norm(got)
    return np.linalg.norm(ref - got) / (den if den else 1.0)


def random_case(seed, depthwise=False, max_dil=1, max_stride=3, paddings=("SAME", "VALID", "EXPLICIT")):
    """A random valid NHWC configuration whose output is non-empty."""
    rng = np.random.default_rng(seed)
    while True:
        n, c, m = (int(v) for v in rng.integers(1, 4, size=3))
        h, w = (int(v) for v in rng.integers(1, 10, size=2))
        kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
        sh, sw = (int(v) for v in rng.integers(1, max_stride + 1, size=2))
        if depthwise:
            sw = sh
        dh, dw = (int(v) for v in rng.integers(1, max_dil + 1, size=2))
        padding = str(rng.choice(paddings))
        pads = [int(v) for v in rng.integers(0, 3, size=4)] if padding == "EXPLICIT" else [0] * 4
        try:
            oh = output_size(h, kh, sh, dh, padding, pads[0], pads[1])[0]
            ow = output_size(w, kw, sw, dw, padding, pads[2], pads[3])[0]
        except ValueError:
            continue
        if oh < 1 or ow < 1:
            continue
        cfg = dict(n=n, h=h, w=w, c=c, m=m, kh=kh, kw=kw, strides=[1, sh, sw, 1],
                   dilations=[1, dh, dw, 1], padding=padding, pads=pads)
        out_c = c * m if depthwise else m
        x = rng.standard_normal((n, h, w, c))
        f = rng.standard_normal((kh, kw, c, m))
        dy = rng.standard_normal((n, oh, ow, out_c))
        return cfg, x, f, dy


def ref_kwargs(cfg):
    ep = [0, 0, *cfg["pads"], 0, 0] if cfg["padding"] == "EXPLICIT" else []
    return dict(strides=cfg["strides"], padding=cfg["padding"], explicit_paddings=ep,
                dilations=cfg["dilations"])


def tf_padding(cfg):
    if cfg["padding"] != "EXPLICIT":
        return cfg["padding"]
    t, b, l, r = cfg["pads"]
    return [[0, 0], [t, b], [l, r], [0, 0]]


def tf_conv2d_grads(cfg, x, f, dy, dtype):
    X, F, DY = (tf.constant(a, dtype) for a in (x, f, dy))
    kw = dict(strides=cfg["strides"], padding=tf_padding(cfg), dilations=cfg["dilations"])
    with tf.device("/CPU:0"):
        dx = tf.compat.v1.nn.conv2d_backprop_input(list(x.shape), F, DY, **kw)
        df = tf.compat.v1.nn.conv2d_backprop_filter(X, list(f.shape), DY, **kw)
    return dx.numpy(), df.numpy()


def check_conv2d(seed, cfg, x, f, dy, dtype, tol):
    dx_tf, df_tf = tf_conv2d_grads(cfg, x, f, dy, dtype)
    dx = conv2d_backprop_input(list(x.shape), f, dy, **ref_kwargs(cfg))
    df = conv2d_backprop_filter(x, list(f.shape), dy, **ref_kwargs(cfg))
    e1, e2 = rel_err(dx, dx_tf), rel_err(df, df_tf)
    assert e1 <= tol, f"seed={seed} BI rel err {e1:.3g} {cfg}"
    assert e2 <= tol, f"seed={seed} BF rel err {e2:.3g} {cfg}"


def round32(*arrays):
    return [a.astype(np.float32).astype(np.float64) for a in arrays]


# ----------------------------------------------------------------------------- output_size

def test_output_size_table():
    assert output_size(1, 4, 2, 1, "VALID") == (0, 0, 0)
    with pytest.raises(ValueError, match="negative"):
        output_size(1, 4, 1, 1, "VALID")
    assert output_size(2, 3, 1, 1, "VALID")[0] == 0
    assert output_size(5, 3, 2, 1, "SAME")[0] == 3
    assert output_size(6, 3, 2, 1, "SAME")[0] == 3


def test_output_size_padding_split():
    # need = (3-1)*2 + 3 - 6 = 1 -> all of it after; in=5: need = 2 -> 1 / 1
    assert output_size(6, 3, 2, 1, "SAME") == (3, 0, 1)
    assert output_size(5, 3, 2, 1, "SAME") == (3, 1, 1)
    assert output_size(7, 4, 1, 1, "SAME") == (7, 1, 2)
    assert output_size(7, 3, 1, 2, "SAME") == (7, 2, 2)          # eff = 5
    assert output_size(7, 3, 2, 1, "EXPLICIT", 1, 2) == (4, 1, 2)
    assert output_size(7, 3, 2, 2, "VALID") == (2, 0, 0)
    with pytest.raises(ValueError):
        output_size(5, 3, 0, 1, "SAME")
    with pytest.raises(ValueError):
        output_size(5, 3, 1, 0, "SAME")


# ----------------------------------------------------------------------------- conv2d vs TF

@pytest.mark.parametrize("seed", range(40))
def test_conv2d_grads_vs_tf_float64(seed):
    cfg, x, f, dy = random_case(seed)
    check_conv2d(seed, cfg, x, f, dy, tf.float64, TOL64)


@pytest.mark.parametrize("seed", range(100, 120))
def test_conv2d_dilated_grads_vs_tf(seed):
    """Dilations 1..3 with strides 1..3.  float64 TF kernels reject dilation > 1 on CPU;
    then compare with the float32 oneDNN kernels on float32-representable data."""
    cfg, x, f, dy = random_case(seed, max_dil=3, paddings=("SAME", "VALID"))
    try:
        check_conv2d(seed, cfg, x, f, dy, tf.float64, TOL64)
        return
    except tf.errors.InvalidArgumentError as e:
        assert max(cfg["dilations"]) > 1, f"seed={seed} unexpected TF error {e}"
    x, f, dy = round32(x, f, dy)
    try:
        check_conv2d(seed, cfg, x, f, dy, tf.float32, TOL32)
    except tf.errors.OpError as e:
        pytest.skip(f"seed={seed}: TF float32 kernels reject {cfg}: {e.message[:120]}")


@pytest.mark.parametrize("seed", range(200, 212))
def test_conv2d_dilated_grads_vs_tf_autodiff_float64(seed):
    """float64 dilated gradients (stride 1) against autodiff of tf.nn.convolution."""
    cfg, x, f, dy = random_case(seed, max_dil=3, max_stride=1, paddings=("SAME", "VALID"))
    X, F = tf.constant(x), tf.constant(f)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([X, F])
        y = tf.nn.convolution(X, F, padding=cfg["padding"], dilations=cfg["dilations"][1:3])
        loss = tf.reduce_sum(y * dy)
    dx_tf, df_tf = tape.gradient(loss, X).numpy(), tape.gradient(loss, F).numpy()
    kw = ref_kwargs(cfg)
    e0 = rel_err(forward_conv2d(x, f, **kw), y.numpy())
    e1 = rel_err(conv2d_backprop_input(x.shape, f, dy, **kw), dx_tf)
    e2 = rel_err(conv2d_backprop_filter(x, f.shape, dy, **kw), df_tf)
    assert max(e0, e1, e2) <= TOL64, f"seed={seed} errs {e0:.3g} {e1:.3g} {e2:.3g} {cfg}"


@pytest.mark.parametrize("seed", range(300, 306))
def test_conv2d_nchw_vs_tf_float32(seed):
    """NCHW through TF's oneDNN float32 kernels (the float64 CPU kernels are NHWC only)."""
    cfg, x, f, dy = random_case(seed, max_dil=2, paddings=("SAME", "VALID"))
    x, f, dy = round32(x, f, dy)
    to = lambda a: np.transpose(a, (0, 3, 1, 2))
    xc, dyc = to(x), to(dy)
    s, d = cfg["strides"], cfg["dilations"]
    s_c, d_c = [1, 1, s[1], s[2]], [1, 1, d[1], d[2]]
    pad = tf_padding(cfg)
    pad_c = pad if isinstance(pad, str) else [pad[0], pad[3], pad[1], pad[2]]
    ep_c = [0, 0, 0, 0, *cfg["pads"]] if cfg["padding"] == "EXPLICIT" else []
    kw = dict(strides=s_c, padding=pad_c, dilations=d_c, data_format="NCHW")
    try:
        with tf.device("/CPU:0"):
            dx_tf = tf.compat.v1.nn.conv2d_backprop_input(list(xc.shape), tf.constant(f, tf.float32),
                                                          tf.constant(dyc, tf.float32), **kw).numpy()
            df_tf = tf.compat.v1.nn.conv2d_backprop_filter(tf.constant(xc, tf.float32), list(f.shape),
                                                           tf.constant(dyc, tf.float32), **kw).numpy()
    except tf.errors.OpError as e:
        pytest.skip(f"seed={seed}: TF rejects NCHW float32 {cfg}: {e.message[:120]}")
    rk = dict(strides=s_c, padding=cfg["padding"], explicit_paddings=ep_c, dilations=d_c,
              data_format="NCHW")
    e1 = rel_err(conv2d_backprop_input(xc.shape, f, dyc, **rk), dx_tf)
    e2 = rel_err(conv2d_backprop_filter(xc, f.shape, dyc, **rk), df_tf)
    assert max(e1, e2) <= TOL32, f"seed={seed} errs {e1:.3g} {e2:.3g} {cfg}"


@pytest.mark.parametrize("seed", range(400, 410))
def test_conv2d_forward_vs_tf_float64(seed):
    cfg, x, f, _ = random_case(seed, max_dil=3)
    with tf.device("/CPU:0"):
        y_tf = tf.nn.conv2d(tf.constant(x), tf.constant(f), strides=cfg["strides"],
                            padding=tf_padding(cfg), dilations=cfg["dilations"]).numpy()
    e = rel_err(forward_conv2d(x, f, **ref_kwargs(cfg)), y_tf)
    assert e <= TOL64, f"seed={seed} rel err {e:.3g} {cfg}"


# ----------------------------------------------------------------------------- depthwise vs TF

@pytest.mark.parametrize("seed", range(500, 525))
def test_depthwise_grads_vs_tf_float64(seed):
    cfg, x, f, dy = random_case(seed, depthwise=True)
    kw = dict(strides=cfg["strides"], padding=tf_padding(cfg))
    with tf.device("/CPU:0"):
        dx_tf = tf.nn.depthwise_conv2d_backprop_input(list(x.shape), tf.constant(f), tf.constant(dy), **kw)
        df_tf = tf.nn.depthwise_conv2d_backprop_filter(tf.constant(x), list(f.shape), tf.constant(dy), **kw)
    dx = depthwise_backprop_input(list(x.shape), f, dy, **ref_kwargs(cfg))
    df = depthwise_backprop_filter(x, list(f.shape), dy, **ref_kwargs(cfg))
    e1, e2 = rel_err(dx, dx_tf.numpy()), rel_err(df, df_tf.numpy())
    assert e1 <= TOL64, f"seed={seed} DI rel err {e1:.3g} {cfg}"
    assert e2 <= TOL64, f"seed={seed} DF rel err {e2:.3g} {cfg}"


@pytest.mark.parametrize("seed", range(600, 612))
def test_depthwise_dilated_vs_tf_float64(seed):
    """Dilated depthwise forward and its true gradients against tf.nn.depthwise_conv2d
    (dilation via space_to_batch; stride 1) and autodiff through it."""
    cfg, x, f, dy = random_case(seed, depthwise=True, max_dil=3, max_stride=1,
                                paddings=("SAME", "VALID"))
    X, F = tf.constant(x), tf.constant(f)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([X, F])
        y = tf.nn.depthwise_conv2d(X, F, strides=[1, 1, 1, 1], padding=cfg["padding"],
                                   dilations=cfg["dilations"][1:3])
        loss = tf.reduce_sum(y * dy)
    dx_tf, df_tf = tape.gradient(loss, X).numpy(), tape.gradient(loss, F).numpy()
    kw = ref_kwargs(cfg)
    e0 = rel_err(forward_conv2d(x, f, depthwise=True, **kw), y.numpy())
    e1 = rel_err(depthwise_backprop_input(x.shape, f, dy, **kw), dx_tf)
    e2 = rel_err(depthwise_backprop_filter(x, f.shape, dy, **kw), df_tf)
    assert max(e0, e1, e2) <= TOL64, f"seed={seed} errs {e0:.3g} {e1:.3g} {e2:.3g} {cfg}"


@pytest.mark.parametrize("seed", range(700, 706))
def test_depthwise_forward_strided_vs_tf_float64(seed):
    cfg, x, f, _ = random_case(seed, depthwise=True, paddings=("SAME", "VALID"))
    y_tf = tf.nn.depthwise_conv2d(tf.constant(x), tf.constant(f), strides=cfg["strides"],
                                  padding=cfg["padding"]).numpy()
    e = rel_err(forward_conv2d(x, f, depthwise=True, **ref_kwargs(cfg)), y_tf)
    assert e <= TOL64, f"seed={seed} rel err {e:.3g} {cfg}"


# ----------------------------------------------------------------------------- adjoint identity

@pytest.mark.parametrize("seed", range(800, 806))
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_adjoint(seed, data_format, depthwise):
    """<conv(x, w), dy> == <x, BI(dy, w)> == <w, BF(x, dy)>, dilations and strides 1..3."""
    cfg, x, f, dy = random_case(seed, depthwise=depthwise, max_dil=3)
    kw = ref_kwargs(cfg)
    if data_format == "NCHW":
        to = lambda a: np.transpose(a, (0, 3, 1, 2))
        x, dy = to(x), to(dy)
        s, d = kw["strides"], kw["dilations"]
        kw["strides"], kw["dilations"] = [1, 1, s[1], s[2]], [1, 1, d[1], d[2]]
        if kw["explicit_paddings"]:
            kw["explicit_paddings"] = [0, 0, 0, 0, *cfg["pads"]]
    bi, bf = ((depthwise_backprop_input, depthwise_backprop_filter) if depthwise
              else (conv2d_backprop_input, conv2d_backprop_filter))
    y = forward_conv2d(x, f, data_format=data_format, depthwise=depthwise, **kw)
    assert y.shape == dy.shape, f"seed={seed} {y.shape} vs {dy.shape} {cfg}"
    a = np.vdot(y, dy)
    b = np.vdot(x, bi(x.shape, f, dy, data_format=data_format, **kw))
    c = np.vdot(f, bf(x, f.shape, dy, data_format=data_format, **kw))
    scale = np.linalg.norm(y) * np.linalg.norm(dy) + 1e-300
    assert abs(a - b) <= TOL64 * scale and abs(a - c) <= TOL64 * scale, \
        f"seed={seed} <y,dy>={a} <x,BI>={b} <w,BF>={c} {cfg}"


def test_nchw_matches_nhwc():
    cfg, x, f, dy = random_case(900, max_dil=2)
    kw = ref_kwargs(cfg)
    to, back = (lambda a: np.transpose(a, (0, 3, 1, 2))), (lambda a: np.transpose(a, (0, 2, 3, 1)))
    kwc = dict(kw, strides=[1, 1, *kw["strides"][1:3]], dilations=[1, 1, *kw["dilations"][1:3]],
               explicit_paddings=[0, 0, 0, 0, *cfg["pads"]] if kw["explicit_paddings"] else [],
               data_format="NCHW")
    dx = conv2d_backprop_input(x.shape, f, dy, **kw)
    dxc = conv2d_backprop_input(to(x).shape, f, to(dy), **kwc)
    np.testing.assert_array_equal(back(dxc), dx)
    np.testing.assert_array_equal(conv2d_backprop_filter(to(x), f.shape, to(dy), **kwc),
                                  conv2d_backprop_filter(x, f.shape, dy, **kw))


# ----------------------------------------------------------------------------- shapes, edge cases

def test_two_element_input_sizes():
    cfg, x, f, dy = random_case(950)
    kw = ref_kwargs(cfg)
    np.testing.assert_array_equal(conv2d_backprop_input(x.shape[1:3], f, dy, **kw),
                                  conv2d_backprop_input(x.shape, f, dy, **kw))
    dx_tf, _ = tf_conv2d_grads(cfg, x, f, dy, tf.float64)
    with tf.device("/CPU:0"):
        dx_tf2 = tf.compat.v1.nn.conv2d_backprop_input(
            list(x.shape[1:3]), tf.constant(f), tf.constant(dy), strides=cfg["strides"],
            padding=tf_padding(cfg)).numpy()
    np.testing.assert_array_equal(dx_tf2, dx_tf)


def test_input_size_ambiguity():
    """in=5 and in=6 (k=3, s=2, SAME) both give out=3; both input sizes are valid."""
    rng = np.random.default_rng(7)
    f = rng.standard_normal((3, 3, 2, 2))
    dy = rng.standard_normal((1, 3, 3, 2))
    for h in (5, 6):
        dx = conv2d_backprop_input((1, h, h, 2), f, dy, [1, 2, 2, 1], "SAME")
        dx_tf = tf.compat.v1.nn.conv2d_backprop_input([1, h, h, 2], tf.constant(f), tf.constant(dy),
                                                      [1, 2, 2, 1], "SAME").numpy()
        assert rel_err(dx, dx_tf) <= TOL64, h


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_empty_tensors(depthwise):
    bi, bf = ((depthwise_backprop_input, depthwise_backprop_filter) if depthwise
              else (conv2d_backprop_input, conv2d_backprop_filter))
    oc = lambda c, m: c * m if depthwise else m
    s = [1, 2, 2, 1]
    # batch 0
    dx = bi((0, 5, 5, 2), np.ones((3, 3, 2, 2)), np.ones((0, 3, 3, oc(2, 2))), s, "SAME")
    assert dx.shape == (0, 5, 5, 2) and dx.dtype == np.float64
    dw = bf(np.ones((0, 5, 5, 2)), (3, 3, 2, 2), np.ones((0, 3, 3, oc(2, 2))), s, "SAME")
    assert dw.shape == (3, 3, 2, 2) and not dw.any()
    # multiplier / out depth 0
    dx = bi((2, 5, 5, 2), np.ones((3, 3, 2, 0)), np.ones((2, 3, 3, 0)), s, "SAME")
    assert dx.shape == (2, 5, 5, 2) and not dx.any()
    # output spatial size 0 (in=1, k=4, s=2 VALID gives 0, not an error)
    dx = bi((1, 1, 5, 2), np.ones((4, 1, 2, 1)), np.ones((1, 0, 3, oc(2, 1))), s, "VALID")
    assert dx.shape == (1, 1, 5, 2) and not dx.any()
    dw = bf(np.ones((1, 1, 5, 2)), (4, 1, 2, 1), np.ones((1, 0, 3, oc(2, 1))), s, "VALID")
    assert dw.shape == (4, 1, 2, 1) and not dw.any()
    y = forward_conv2d(np.ones((1, 1, 5, 2)), np.ones((4, 1, 2, 1)), s, "VALID", depthwise=depthwise)
    assert y.shape == (1, 0, 3, oc(2, 1))
    # input depth 0
    dw = bf(np.ones((1, 4, 4, 0)), (2, 2, 0, 3), np.ones((1, 3, 3, 0 if depthwise else 3)),
            [1, 1, 1, 1], "VALID")
    assert dw.shape == (2, 2, 0, 3)


def test_rejects_mismatched_out_backprop():
    f = np.ones((3, 3, 2, 2))
    with pytest.raises(ValueError):
        conv2d_backprop_input((1, 6, 6, 2), f, np.ones((1, 4, 3, 2)), [1, 2, 2, 1], "SAME")
    with pytest.raises(ValueError):
        conv2d_backprop_filter(np.ones((1, 6, 6, 2)), f.shape, np.ones((1, 3, 3, 3)), [1, 2, 2, 1], "SAME")
    with pytest.raises(ValueError, match="negative"):
        conv2d_backprop_input((1, 1, 1, 2), np.ones((4, 4, 2, 2)), np.ones((1, 0, 0, 2)),
                              [1, 1, 1, 1], "VALID")
