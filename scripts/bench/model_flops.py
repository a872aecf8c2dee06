"""Forward FLOPs per sample of dtrain's presets, from their shapes alone (no PyTorch).

Counts the products only: 2 per multiply-add of every convolution (depthwise included)
and dense layer, as scripts/bench/peer_models.py (mlp, cnn: the same figures as its
forward_flops) and model_peers.py (`preset = "resnet"`, `preset = "mobilenet_v2"`) build
them. `dtrain check` also counts biases, batch norm, activations, adds and pooling (a few
percent more); the GPU benchmark prefers its figure and uses these when it cannot read it.

  python3 scripts/bench/model_flops.py   prints the figures for the benchmark's shapes
"""


def conv_out(side, kernel, stride):
    """Output side of a convolution padded by (kernel - 1) // 2, as the presets pad."""
    pad = (kernel - 1) // 2
    return (side + 2 * pad - kernel) // stride + 1


def conv_flops(cin, cout, kernel, side_out, groups=1):
    return 2 * (cin // groups) * cout * kernel * kernel * side_out * side_out


def cifar_resnet_flops(depth=20, side=32, channels=3, classes=10):
    """The CIFAR ResNet (6n+2): conv3x3(16), stages of n basic blocks at 16, 32, 64 filters
    (the first block of stages 2 and 3 at stride 2, with a 1x1 projection), dense."""
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(f"CIFAR ResNet depth {depth} is not 6n+2")
    n = (depth - 2) // 6
    flops = conv_flops(channels, 16, 3, side)
    inp = 16
    for s, width in enumerate((16, 32, 64)):
        for b in range(n):
            stride = 2 if (b == 0 and s > 0) else 1
            out_side = conv_out(side, 3, stride)
            flops += conv_flops(inp, width, 3, out_side) + conv_flops(width, width, 3, out_side)
            if stride != 1 or inp != width:
                flops += conv_flops(inp, width, 1, out_side)
            side, inp = out_side, width
    return flops + 2 * inp * classes


def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


MOBILENET_V2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                         (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenet_v2_flops(side=96, channels=3, classes=10, width=1.0):
    """torchvision's MobileNetV2: conv3x3/2, inverted residuals (1x1 expand, 3x3 depthwise,
    1x1 project), conv1x1 to 1280 x max(1, width), dense."""
    inp = make_divisible(32 * width)
    last = make_divisible(1280 * max(1.0, width))
    side = conv_out(side, 3, 2)
    flops = conv_flops(channels, inp, 3, side)
    for t, c, n, s in MOBILENET_V2_SETTINGS:
        out = make_divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = int(round(inp * t))
            if t != 1:
                flops += conv_flops(inp, hidden, 1, side)
            side = conv_out(side, 3, stride)
            flops += conv_flops(hidden, hidden, 3, side, groups=hidden)
            flops += conv_flops(hidden, out, 1, side)
            inp = out
    flops += conv_flops(inp, last, 1, side)
    return flops + 2 * last * classes


def mlp_flops(inputs=784, hidden=(512, 256), classes=10):
    dims = [inputs, *hidden, classes]
    return sum(2 * a * b for a, b in zip(dims, dims[1:]))


def cnn_flops(side=28, channels=1, classes=10):
    """conv3x3(32)-maxpool2-conv3x3(64)-maxpool2-dense(128)-dense(classes)."""
    pooled = side // 2 // 2
    return (conv_flops(channels, 32, 3, side) + conv_flops(32, 64, 3, side // 2)
            + 2 * 64 * pooled * pooled * 128 + 2 * 128 * classes)


def forward_flops(model, shape, classes, width=1.0):
    """model: mlp, cnn, resnetN (CIFAR) or mobilenet_v2; shape (channels, height, width), square."""
    channels, side = shape[0], shape[1]
    if model == "mlp":
        return mlp_flops(channels * side * shape[2], classes=classes)
    if model == "cnn":
        return cnn_flops(side, channels, classes)
    if model.startswith("resnet") and model[6:].isdigit():
        return cifar_resnet_flops(int(model[6:]), side, channels, classes)
    if model == "mobilenet_v2":
        return mobilenet_v2_flops(side, channels, classes, width)
    raise ValueError(f"no FLOP formula for {model!r}; known: mlp, cnn, resnetN (6n+2), mobilenet_v2")


if __name__ == "__main__":
    for name, shape in (("mlp", (1, 28, 28)), ("cnn", (1, 28, 28)), ("resnet20", (3, 32, 32)),
                        ("mobilenet_v2", (3, 96, 96)), ("mobilenet_v2", (3, 224, 224))):
        print(f"{name:13} {shape[0]}x{shape[1]}x{shape[2]}: {forward_flops(name, shape, 10):,} forward FLOPs/sample")
