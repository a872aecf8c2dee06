"""dtrain's model presets written in PyTorch, for the benchmark peers.

The same layers as models/model_builder.cpp builds for `preset = "mlp"` (hidden 512, 256;
no dropout) and `preset = "cnn"` (conv3x3(32, pad 1)-relu-maxpool2-conv3x3(64, pad 1)-
relu-maxpool2-dense(128)-relu-dense(classes); no dropout), for 1x28x28 inputs.
"""
import torch


def build(model, classes=10):
    nn = torch.nn
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, classes))
    if model == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, classes))
    raise ValueError(f"unknown preset {model!r}; known: cnn, mlp")


def forward_flops(model):
    """Forward FLOPs per 1x28x28 sample of the products alone (2 per multiply-add of
    the dense and convolution layers). `dtrain check` adds biases, relus and pooling
    (under 0.3% more for these presets); the benchmark prefers its figure and uses
    this one when it cannot read it."""
    if model == "mlp":
        dims = [784, 512, 256, 10]
        return sum(2 * a * b for a, b in zip(dims, dims[1:]))
    if model == "cnn":
        conv1 = 2 * 9 * 1 * 32 * 28 * 28
        conv2 = 2 * 9 * 32 * 64 * 14 * 14
        return conv1 + conv2 + 2 * 3136 * 128 + 2 * 128 * 10
    raise ValueError(f"unknown preset {model!r}; known: cnn, mlp")
