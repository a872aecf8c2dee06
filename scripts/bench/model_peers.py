"""dtrain's image-model presets written in PyTorch, for the benchmark peers.

The same architectures as `preset = "resnet"` and `preset = "mobilenet_v2"` build:

  cifar_resnet(depth)  He et al. 2015, section 4.2: conv3x3(16) + BN + ReLU, three stages of
                       n basic blocks (16, 32, 64 filters; the first block of stages 2 and 3
                       has stride 2), depth = 6n + 2, global average pool, dense. Convolutions
                       have no bias (BN follows); where the shape changes the shortcut is a
                       1x1 stride-2 convolution + BN (option B of the paper).
  imagenet_resnet(depth)  torchvision's resnet18/34/50/101/152: conv7x7/2(64) + BN + ReLU +
                       maxpool 3x3/2 (pad 1), stages 64, 128, 256, 512 wide of basic blocks
                       (18, 34) or bottlenecks (50 and deeper, v1.5: the stride on the 3x3;
                       4 x the width out), 1x1 conv + BN projection shortcuts where the shape
                       changes, global average pool, fc. ResNet-50 at 1000 classes has
                       torchvision's 25,557,032 parameters.
  mobilenet_v2(width)  torchvision's mobilenet_v2 (Sandler et al. 2018), layer for layer.

torchvision is not needed (Debian's python3-torch comes without it); the counts its models
have are in PUBLISHED_PARAMS, and `models_vs_pytorch.py --self-check` checks them.
"""
import torch

nn = torch.nn

# Trainable parameters (BatchNorm's running statistics are buffers, not counted): torchvision's
# counts, and the CIFAR ResNets' "0.27M / 0.46M / 0.85M" of the paper's table 6. The paper's
# CIFAR shortcuts are option A (zero padding, no parameters: 269,722 for ResNet-20); the two
# option-B projections add 16*32 + 32*64 weights and 2*(32+64) BN parameters = 2,752.
PUBLISHED_PARAMS = {
    ("resnet20", 10): 269_722 + 2_752,
    ("resnet32", 10): 464_154 + 2_752,
    ("resnet56", 10): 853_018 + 2_752,
    ("resnet18", 1000): 11_689_512,
    ("mobilenet_v2", 1000): 3_504_872,
}


def projection(inp, out, stride):
    """A block's shortcut: 1x1 conv + BN where the shape changes, else None (the identity)."""
    if stride == 1 and inp == out:
        return None
    return nn.Sequential(nn.Conv2d(inp, out, 1, stride, 0, bias=False), nn.BatchNorm2d(out))


class BasicBlock(nn.Module):
    """Two 3x3 conv + BN, ReLU between and after the sum with the shortcut."""
    expansion = 1  # output channels per unit of the stage's width

    def __init__(self, inp, out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = projection(inp, out, stride)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class Bottleneck(nn.Module):
    """torchvision's ResNet-50 block (v1.5, the stride on the 3x3): 1x1 conv down to the width,
    3x3 conv, 1x1 conv up to 4 x the width, each + BN; ReLU between and after the sum with the
    shortcut."""
    expansion = 4

    def __init__(self, inp, width, stride):
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(inp, width, 1, 1, 0, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, 1, 0, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = projection(inp, out, stride)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    """A stem, then stages of blocks; every stage after the first halves the size.
    blocks_per_stage: one count for every stage, or one per stage."""

    def __init__(self, stem, stem_channels, widths, blocks_per_stage, classes, block=BasicBlock):
        super().__init__()
        self.stem = stem
        counts = blocks_per_stage if isinstance(blocks_per_stage, (list, tuple)) else [blocks_per_stage] * len(widths)
        layers, inp = [], stem_channels
        for s, (w, n) in enumerate(zip(widths, counts)):
            for b in range(n):
                stride = 2 if (b == 0 and s > 0) else 1
                layers.append(block(inp, w, stride))
                inp = w * block.expansion
        self.stages = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inp, classes)
        init_weights(self)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def cifar_resnet(depth=20, classes=10):
    if depth < 8 or (depth - 2) % 6 != 0:
        raise ValueError(f"CIFAR ResNet depth {depth} is not 6n+2 (20, 32, 56, ...)")
    stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
    return ResNet(stem, 16, [16, 32, 64], (depth - 2) // 6, classes)


# depth -> blocks per stage and block, as models/resnet_preset.cpp's ImageNet depths.
IMAGENET_DEPTHS = {18: ((2, 2, 2, 2), BasicBlock), 34: ((3, 4, 6, 3), BasicBlock), 50: ((3, 4, 6, 3), Bottleneck),
                   101: ((3, 4, 23, 3), Bottleneck), 152: ((3, 8, 36, 3), Bottleneck)}


def imagenet_resnet(depth=50, classes=1000):
    if depth not in IMAGENET_DEPTHS:
        raise ValueError(f"ImageNet ResNet depth {depth} is not one of {sorted(IMAGENET_DEPTHS)}")
    blocks, block = IMAGENET_DEPTHS[depth]
    stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1))
    return ResNet(stem, 64, [64, 128, 256, 512], list(blocks), classes, block)


def resnet18(classes=1000):
    return imagenet_resnet(18, classes)


def make_divisible(v, divisor=8):
    """torchvision's _make_divisible: the nearest multiple of divisor, never more than 10% below v."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def conv_bn_relu6(inp, out, kernel, stride, groups=1):
    return nn.Sequential(nn.Conv2d(inp, out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(out), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    """1x1 expand (when t > 1) + ReLU6, 3x3 depthwise + ReLU6, 1x1 linear projection; the
    input is added when the block keeps the shape (stride 1, same channels)."""

    def __init__(self, inp, out, stride, expand):
        super().__init__()
        hidden = int(round(inp * expand))
        self.residual = stride == 1 and inp == out
        layers = [conv_bn_relu6(inp, hidden, 1, 1)] if expand != 1 else []
        layers += [conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, out, 1, 1, 0, bias=False), nn.BatchNorm2d(out)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


# t (expansion), c (output channels), n (blocks), s (stride of the first block)
MOBILENET_V2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                         (6, 160, 3, 2), (6, 320, 1, 1)]


class MobileNetV2(nn.Module):
    def __init__(self, classes=1000, width=1.0, dropout=0.2):
        super().__init__()
        inp = make_divisible(32 * width)
        self.last_channel = make_divisible(1280 * max(1.0, width))
        features = [conv_bn_relu6(3, inp, 3, 2)]
        for t, c, n, s in MOBILENET_V2_SETTINGS:
            out = make_divisible(c * width)
            for i in range(n):
                features.append(InvertedResidual(inp, out, s if i == 0 else 1, t))
                inp = out
        features.append(conv_bn_relu6(inp, self.last_channel, 1, 1))
        self.features = nn.Sequential(*features)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(self.last_channel, classes))
        init_weights(self)

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v2(classes=1000, width=1.0):
    return MobileNetV2(classes, width)


def init_weights(model):
    """torchvision's initialisation (He, fan-out, for convolutions; BN at 1 and 0). Speed does
    not depend on it; it keeps the peer a network that trains."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)


def build(name, classes, width=1.0):
    """name: resnet18 / resnet34 / resnet50 / resnet101 / resnet152 (ImageNet), resnetN with
    N = 6n+2 (CIFAR: resnet20, resnet32, resnet56, ...) / mobilenet_v2."""
    if name.startswith("resnet") and name[6:].isdigit():
        depth = int(name[6:])
        # The ImageNet depths first, as dtrain's preset takes them: 50 and 152 are 6n+2 too.
        return imagenet_resnet(depth, classes) if depth in IMAGENET_DEPTHS else cifar_resnet(depth, classes)
    if name == "mobilenet_v2":
        return mobilenet_v2(classes, width)
    raise ValueError(f"unknown model {name!r}; known: resnet18/34/50/101/152, resnetN (6n+2), mobilenet_v2")


def param_count(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
