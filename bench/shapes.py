"""The benchmark layers: real-network convolutions that `make bench` (bench.py), `make
report` (report.py) and the GPU check (tests/core/gpu_check.py) time, and the gradient
call each op makes on one of them.

Standard library only: the GPU check imports this on a machine without TensorFlow.
"""
import dataclasses


@dataclasses.dataclass(frozen=True)
class Layer:
    family: str        # "conv2d", "grouped" (conv2d ops) or "depthwise": which ops run it
    label: str
    hw: int            # input rows = cols
    in_depth: int
    out_channels: int  # conv2d: output depth; depthwise: depth multiplier
    k: int             # filter rows = cols
    stride: int = 1
    dilation: int = 1
    batch: int = 8
    padding: str = "SAME"  # "SAME" or "VALID"
    groups: int = 1    # grouped conv2d: the filter reads in_depth / groups channels

    @property
    def depthwise(self):
        return self.family == "depthwise"

    def out_hw(self):
        """TF's output rows (= cols)."""
        if self.padding == "SAME":
            return -(-self.hw // self.stride)
        return (self.hw - (self.k - 1) * self.dilation - 1) // self.stride + 1


def _conv(label, hw, cin, cout, k, **kwargs):
    return Layer("conv2d", label, hw, cin, cout, k, **kwargs)


def _grouped(label, hw, c, groups, k=3, **kwargs):
    return Layer("grouped", label, hw, c, c, k, groups=groups, **kwargs)


def _dw(label, hw, c, k=3, mult=1, **kwargs):
    return Layer("depthwise", label, hw, c, mult, k, **kwargs)


LAYERS = (
    _conv("ResNet-50 3x3 64->64 @56", 56, 64, 64, 3),
    _conv("ResNet-50 1x1 64->256 @56", 56, 64, 256, 1, padding="VALID"),
    _conv("ResNet-50 1x1 256->64 @56", 56, 256, 64, 1, padding="VALID"),
    _conv("ResNet-50 3x3 s2 128->128 @56", 56, 128, 128, 3, stride=2),
    _conv("ResNet-50 3x3 256->256 @14", 14, 256, 256, 3),
    _conv("ResNet-50 1x1 1024->256 @14", 14, 1024, 256, 1, padding="VALID"),
    _conv("ResNet-50 3x3 512->512 @7", 7, 512, 512, 3),
    _conv("ResNet-50 7x7 s2 3->64 @224", 224, 3, 64, 7, stride=2),
    _conv("VGG 3x3 128->128 @112 (N4)", 112, 128, 128, 3, batch=4),
    _conv("DeepLab 3x3 d2 256->256 @33 (N4)", 33, 256, 256, 3, dilation=2, batch=4),
    _dw("MobileNetV2 dw 3x3 C32 @112", 112, 32),
    _dw("MobileNetV2 dw 3x3 s2 C96 @112", 112, 96, stride=2),
    _dw("MobileNetV2 dw 3x3 C144 @56", 56, 144),
    _dw("MobileNetV2 dw 3x3 s2 C144 @56", 56, 144, stride=2),
    _dw("MobileNetV2 dw 3x3 C192 @28", 28, 192),
    _dw("MobileNetV2 dw 3x3 C384 @14", 14, 384),
    _dw("MobileNetV2 dw 3x3 C576 @14", 14, 576),
    _dw("MobileNetV2 dw 3x3 C960 @7", 7, 960),
    _dw("EfficientNet dw 5x5 C240 @28", 28, 240, k=5),
    _dw("dw 3x3 x2 C64 @56", 56, 64, mult=2),
    # ResNeXt-50 32x4d's grouped 3x3 (4, 8, 16, 32 channels a group); RegNetX's group
    # widths 8 (200MF) and 16 (400MF), stride 1 and the stride-2 stage entries.
    _grouped("ResNeXt-50 3x3 g32 128->128 @56", 56, 128, 32),
    _grouped("ResNeXt-50 3x3 g32 256->256 @28", 28, 256, 32),
    _grouped("ResNeXt-50 3x3 g32 512->512 @14", 14, 512, 32),
    _grouped("ResNeXt-50 3x3 g32 1024->1024 @7", 7, 1024, 32),
    _grouped("RegNetX-200MF 3x3 w8 56->56 @28", 28, 56, 7),
    _grouped("RegNetX-200MF 3x3 s2 w8 152->152 @28", 28, 152, 19, stride=2),
    _grouped("RegNetX-400MF 3x3 w16 64->64 @28", 28, 64, 4),
    _grouped("RegNetX-400MF 3x3 s2 w16 160->160 @28", 28, 160, 10, stride=2),
)
BY_LABEL = {layer.label: layer for layer in LAYERS}


@dataclasses.dataclass(frozen=True)
class Problem:
    """One op's gradient on a layer: the shapes and attributes of the call, in
    `data_format` (filters are HWIO in both layouts)."""
    layer: Layer
    spec: object       # the op-table row (tf_conv_backprop._ops.OpSpec)
    dtype: str
    data_format: str
    batch: int

    def _order(self, n, h, w, c):
        return [n, h, w, c] if self.data_format == "NHWC" else [n, c, h, w]

    @property
    def padding(self):
        return self.layer.padding

    @property
    def strides4(self):
        return self._order(1, self.layer.stride, self.layer.stride, 1)

    @property
    def dilations4(self):
        return self._order(1, self.layer.dilation, self.layer.dilation, 1)

    @property
    def input_shape(self):
        return self._order(self.batch, self.layer.hw, self.layer.hw, self.layer.in_depth)

    @property
    def filter_shape(self):
        return [self.layer.k, self.layer.k, self.layer.in_depth // self.layer.groups,
                self.layer.out_channels]

    @property
    def out_backprop_shape(self):
        out = self.layer.out_hw()
        depth = self.layer.out_channels * (self.layer.in_depth if self.layer.depthwise else 1)
        return self._order(self.batch, out, out, depth)

    @property
    def output_shape(self):
        return self.input_shape if self.spec.computes == "input" else self.filter_shape

    @property
    def reduction_length(self):
        out = self.layer.out_hw()
        return self.spec.reduction_length(self.filter_shape, self.batch, out, out)

    @property
    def flops(self):
        """2 x the multiply-adds of the forward convolution (the same for its gradients)."""
        layer, out = self.layer, self.layer.out_hw()
        return (2 * self.batch * out * out * layer.k * layer.k * layer.in_depth * layer.out_channels
                // layer.groups)
