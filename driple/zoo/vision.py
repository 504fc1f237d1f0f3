"""Image classifiers: vgg, resnet, densenet, mobilenetv2, googlenet, alexnet, vit.

Each is torchvision's design re-written with torch.nn (same layers, parameter counts and
initialisation), plus a ``width`` multiplier on every channel count and a CIFAR ``variant`` for
small images: a 3x3 stride-1 stem without the early down-sampling (as in the usual CIFAR
re-implementations), so a 32x32 image keeps enough resolution. ``variant="auto"`` picks
``cifar`` below 128 px and ``imagenet`` from 128 px on. Inputs are float ``[B, 3, H, W]``;
outputs are logits ``[B, num_classes]``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from driple.zoo.blocks import TransformerLayer
from driple.zoo.registry import Family, Knob, register_family, register_preset
from driple.zoo.tasks import IMAGE_CLASSIFICATION

VARIANTS = ("auto", "cifar", "imagenet")
MIN_IMAGE_SIZE = {"cifar": 32, "imagenet": 64}  # px; smaller inputs shrink to nothing


def _at_least(low):
    return lambda v: None if v >= low else f"must be >= {low}"


def _in_range(low, high):
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def _image_knobs(image_size: int = 32, num_classes: int = 10, width: float = 1.0) -> tuple[Knob, ...]:
    return (
        Knob("image_size", image_size, "input height = width, px", check=_in_range(16, 1024)),
        Knob("num_classes", num_classes, "number of output classes", check=_at_least(2)),
        Knob("width", width, "multiplier on every channel count", check=_in_range(0.0625, 8.0)),
        Knob("variant", "auto", "stem and head: cifar (3x3 stem, no early pooling), imagenet, "
             "or auto (cifar below 128 px)", choices=VARIANTS),
    )


def is_cifar(config: dict) -> bool:
    """True when the CIFAR stem/head is used (``variant`` cifar, or auto below 128 px)."""
    if config["variant"] == "auto":
        return config["image_size"] < 128
    return config["variant"] == "cifar"


def _validate_image(config: dict) -> str | None:
    variant = "cifar" if is_cifar(config) else "imagenet"
    low = MIN_IMAGE_SIZE[variant]
    if config["image_size"] < low:
        return f"image_size={config['image_size']} is too small for the {variant} variant (>= {low} px)"
    return None


def _ch(channels: int, width: float) -> int:
    """A channel count scaled by the width multiplier (at least 1)."""
    return max(1, int(round(channels * width)))


def _init_cnn(model: nn.Module) -> None:
    """torchvision's CNN init: Kaiming-normal convs (fan-out), BN at 1/0, Linear N(0, 0.01)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)


# =========================================================================== VGG
VGG_LAYERS = {  # Simonyan & Zisserman 2015, configurations A, B, D, E; "M" = 2x2 max-pool
    11: (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    13: (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    16: (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
    19: (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
         512, 512, 512, 512, "M"),
}


class VGG(nn.Module):
    """VGG: 3x3 conv stacks and five max-pools. ImageNet head: 7x7 average pool and
    4096-4096 FC with dropout; CIFAR head: global average pool and one Linear."""

    def __init__(self, depth: int = 16, width: float = 1.0, num_classes: int = 1000,
                 batch_norm: bool = False, cifar: bool = False, dropout: float = 0.5) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for v in VGG_LAYERS[depth]:
            if v == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
                continue
            out_ch = _ch(v, width)
            layers.append(nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(out_ch))
            layers.append(nn.ReLU(inplace=True))
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        if cifar:
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.classifier = nn.Linear(in_ch, num_classes)
        else:
            hidden = _ch(4096, width)
            self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
            self.classifier = nn.Sequential(
                nn.Linear(in_ch * 7 * 7, hidden), nn.ReLU(True), nn.Dropout(dropout),
                nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(dropout),
                nn.Linear(hidden, num_classes),
            )
        _init_cnn(self)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def _build_vgg(c: dict) -> nn.Module:
    return VGG(c["depth"], c["width"], c["num_classes"], c["batch_norm"], is_cifar(c))


register_family(Family(
    name="vgg",
    description="VGG (Simonyan & Zisserman 2015): plain 3x3 conv stacks; default VGG-11-BN at "
    "half width on 32x32 CIFAR images",
    knobs=(
        Knob("depth", 11, "weight layers: 11, 13, 16 or 19", choices=(11, 13, 16, 19)),
        Knob("batch_norm", True, "BatchNorm after every conv"),
        *_image_knobs(width=0.5),
    ),
    build=_build_vgg,
    task=lambda c: IMAGE_CLASSIFICATION,
    default_batch_size=32,
    validate=_validate_image,
))


# =========================================================================== ResNet
RESNET_LAYOUTS = {  # ImageNet layouts (He et al. 2016, table 1): block kind, blocks per stage
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}


def _resnet_depth_problem(depth: int) -> str | None:
    if depth in RESNET_LAYOUTS or (depth >= 8 and (depth - 2) % 6 == 0):
        return None
    return "use 18, 34, 50, 101, 152 (ImageNet layouts) or 6n+2 such as 20, 32, 44, 56, 110 (CIFAR layouts)"


class BasicBlock(nn.Module):
    """Two 3x3 convs with an identity or projection shortcut (``expansion`` 1)."""

    expansion = 1

    def __init__(self, in_ch: int, planes: int, stride: int = 1, shortcut: str = "B") -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(in_ch, planes, stride, shortcut)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.downsample(x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided, "ResNet v1.5"), 1x1 expand x4, with a shortcut."""

    expansion = 4

    def __init__(self, in_ch: int, planes: int, stride: int = 1, shortcut: str = "B") -> None:
        super().__init__()
        out_ch = planes * self.expansion
        self.conv1 = nn.Conv2d(in_ch, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(in_ch, out_ch, stride, shortcut)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.downsample(x))


class PadShortcut(nn.Module):
    """He et al.'s CIFAR option A: subsample by ``stride`` and zero-pad the new channels."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        extra = out_ch - in_ch
        self.pad = (0, 0, 0, 0, extra // 2, extra - extra // 2)

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x[:, :, :: self.stride, :: self.stride], self.pad)


def _shortcut(in_ch: int, out_ch: int, stride: int, kind: str) -> nn.Module:
    if stride == 1 and in_ch == out_ch:
        return nn.Identity()
    if kind == "A":
        return PadShortcut(in_ch, out_ch, stride)
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch))


class ResNet(nn.Module):
    """ResNet. ImageNet layouts (depth 18-152): 4 stages of 64-512 channels, 7x7 stem and
    max-pool (or a 3x3 stride-1 stem with ``cifar``). CIFAR layouts (depth 6n+2): 3 stages of
    16-64 channels, n basic blocks each, 3x3 stem, option-A (zero-pad) shortcuts."""

    def __init__(self, depth: int = 50, width: float = 1.0, num_classes: int = 1000,
                 cifar: bool = False) -> None:
        super().__init__()
        if depth in RESNET_LAYOUTS:
            kind, blocks = RESNET_LAYOUTS[depth]
            block = BasicBlock if kind == "basic" else Bottleneck
            planes = [_ch(c, width) for c in (64, 128, 256, 512)]
            shortcut = "B"
        else:
            block, blocks = BasicBlock, (((depth - 2) // 6),) * 3
            planes = [_ch(c, width) for c in (16, 32, 64)]
            shortcut, cifar = "A", True
        stem_ch = planes[0]
        if cifar:
            stem = [nn.Conv2d(3, stem_ch, 3, 1, 1, bias=False), nn.BatchNorm2d(stem_ch), nn.ReLU(inplace=True)]
        else:
            stem = [nn.Conv2d(3, stem_ch, 7, 2, 3, bias=False), nn.BatchNorm2d(stem_ch), nn.ReLU(inplace=True),
                    nn.MaxPool2d(3, 2, 1)]
        self.stem = nn.Sequential(*stem)
        stages, in_ch = [], stem_ch
        for i, (n, p) in enumerate(zip(blocks, planes)):
            layer = []
            for j in range(n):
                layer.append(block(in_ch, p, 2 if (i > 0 and j == 0) else 1, shortcut))
                in_ch = p * block.expansion
            stages.append(nn.Sequential(*layer))
        self.stages = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_ch, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.stages(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


def _build_resnet(c: dict) -> nn.Module:
    return ResNet(c["depth"], c["width"], c["num_classes"], is_cifar(c))


register_family(Family(
    name="resnet",
    description="ResNet (He et al. 2016): basic blocks (18, 34, CIFAR 6n+2) or bottlenecks "
    "(50, 101, 152); default the CIFAR ResNet-20 on 32x32 images",
    knobs=(
        Knob("depth", 20, "layers: 18/34/50/101/152 (ImageNet layouts) or 6n+2 like 20/32/44/56/110 "
             "(CIFAR layouts)", check=_resnet_depth_problem),
        *_image_knobs(),
    ),
    build=_build_resnet,
    task=lambda c: IMAGE_CLASSIFICATION,
    default_batch_size=32,
    validate=_validate_image,
))


# =========================================================================== DenseNet
class DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv (``bn_size`` x growth) - BN-ReLU-3x3 conv (growth) on the concatenation
    of every earlier feature map of the block."""

    def __init__(self, in_ch: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, features: list[Tensor]) -> Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, n_layers: int, in_ch: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(in_ch + i * growth, growth, bn_size) for i in range(n_layers))

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet(nn.Module):
    """DenseNet-BC (Huang et al. 2017): dense blocks joined by BN-ReLU-1x1 conv-2x2 avg-pool
    transitions that halve the channels; 2 x growth stem channels."""

    def __init__(self, growth_rate: int = 32, block_config: tuple[int, ...] = (6, 12, 24, 16),
                 bn_size: int = 4, num_classes: int = 1000, cifar: bool = False) -> None:
        super().__init__()
        ch = 2 * growth_rate
        if cifar:
            stem = [nn.Conv2d(3, ch, 3, 1, 1, bias=False)]
        else:
            stem = [nn.Conv2d(3, ch, 7, 2, 3, bias=False), nn.BatchNorm2d(ch), nn.ReLU(inplace=True),
                    nn.MaxPool2d(3, 2, 1)]
        layers = list(stem)
        for i, n in enumerate(block_config):
            layers.append(DenseBlock(n, ch, growth_rate, bn_size))
            ch += n * growth_rate
            if i != len(block_config) - 1:
                layers += [nn.BatchNorm2d(ch), nn.ReLU(inplace=True), nn.Conv2d(ch, ch // 2, 1, bias=False),
                           nn.AvgPool2d(2, 2)]
                ch //= 2
        layers += [nn.BatchNorm2d(ch), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(ch, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def _validate_densenet(c: dict) -> str | None:
    problem = _validate_image(c)
    if problem:
        return problem
    if not 1 <= len(c["block_config"]) <= 5 or min(c["block_config"]) < 1:
        return "block_config needs 1 to 5 dense blocks of at least 1 layer each, like 6,12,24,16"
    return None


def _build_densenet(c: dict) -> nn.Module:
    return DenseNet(c["growth_rate"], c["block_config"], c["bn_size"], c["num_classes"], is_cifar(c))


register_family(Family(
    name="densenet",
    description="DenseNet-BC (Huang et al. 2017): concatenating dense blocks; default the CIFAR "
    "DenseNet-BC-40 (growth 12, three blocks of 6) on 32x32 images",
    knobs=(
        Knob("growth_rate", 12, "channels each dense layer adds", check=_in_range(2, 128)),
        Knob("block_config", (6, 6, 6), "dense layers per block, e.g. 6,12,24,16"),
        Knob("bn_size", 4, "bottleneck width, in multiples of growth_rate", check=_in_range(1, 8)),
        *[k for k in _image_knobs() if k.name != "width"],
    ),
    build=_build_densenet,
    task=lambda c: IMAGE_CLASSIFICATION,
    default_batch_size=16,
    validate=_validate_densenet,
))


# =========================================================================== MobileNetV2
MOBILENETV2_SETTINGS = (  # expansion t, channels c, repeats n, stride s (Sandler et al. 2018)
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)


def make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's channel rounding: nearest multiple of ``divisor``, never 10% below ``v``."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _conv_bn_relu6(in_ch: int, out_ch: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    """1x1 expand (x t) - 3x3 depthwise (strided) - 1x1 linear project; residual if shapes match."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = int(round(in_ch * expand))
        self.use_residual = stride == 1 and in_ch == out_ch
        layers = [_conv_bn_relu6(in_ch, hidden, 1)] if expand != 1 else []
        layers += [
            _conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2. ``cifar`` makes the stem and the second stage stride 1 (8x down-sampling
    in all instead of 32x)."""

    def __init__(self, width: float = 1.0, num_classes: int = 1000, cifar: bool = False, dropout: float = 0.2) -> None:
        super().__init__()
        in_ch = make_divisible(32 * width)
        self.last_channel = make_divisible(1280 * max(1.0, width))
        layers: list[nn.Module] = [_conv_bn_relu6(3, in_ch, 3, 1 if cifar else 2)]
        for i, (t, c, n, s) in enumerate(MOBILENETV2_SETTINGS):
            if cifar and i == 1:
                s = 1
            out_ch = make_divisible(c * width)
            for j in range(n):
                layers.append(InvertedResidual(in_ch, out_ch, s if j == 0 else 1, t))
                in_ch = out_ch
        layers.append(_conv_bn_relu6(in_ch, self.last_channel, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(self.last_channel, num_classes))
        _init_cnn(self)

    def forward(self, x: Tensor) -> Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


register_family(Family(
    name="mobilenetv2",
    description="MobileNetV2 (Sandler et al. 2018): inverted residuals with depthwise convs; "
    "default half width on 32x32 images",
    knobs=_image_knobs(width=0.5),
    build=lambda c: MobileNetV2(c["width"], c["num_classes"], is_cifar(c)),
    task=lambda c: IMAGE_CLASSIFICATION,
    default_batch_size=32,
    validate=_validate_image,
))


# =========================================================================== GoogLeNet
class BasicConv2d(nn.Module):
    """Conv (no bias) - BN (eps 1e-3) - ReLU, GoogLeNet's unit."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(out_ch, eps=0.001)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class Inception(nn.Module):
    """Four parallel branches concatenated: 1x1; 1x1-3x3; 1x1-3x3 (torchvision's stand-in for
    the paper's 5x5); 3x3 max-pool-1x1."""

    def __init__(self, in_ch: int, ch1: int, ch3red: int, ch3: int, ch5red: int, ch5: int, pool: int) -> None:
        super().__init__()
        self.branch1 = BasicConv2d(in_ch, ch1, 1)
        self.branch2 = nn.Sequential(BasicConv2d(in_ch, ch3red, 1), BasicConv2d(ch3red, ch3, 3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(in_ch, ch5red, 1), BasicConv2d(ch5red, ch5, 3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), BasicConv2d(in_ch, pool, 1))
        self.out_channels = ch1 + ch3 + ch5 + pool

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


GOOGLENET_INCEPTIONS = (  # name, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj (Szegedy et al. 2015)
    ("3a", 64, 96, 128, 16, 32, 32), ("3b", 128, 128, 192, 32, 96, 64), "pool",
    ("4a", 192, 96, 208, 16, 48, 64), ("4b", 160, 112, 224, 24, 64, 64), ("4c", 128, 128, 256, 24, 64, 64),
    ("4d", 112, 144, 288, 32, 64, 64), ("4e", 256, 160, 320, 32, 128, 128), "pool2",
    ("5a", 256, 160, 320, 32, 128, 128), ("5b", 384, 192, 384, 48, 128, 128),
)


class GoogLeNet(nn.Module):
    """GoogLeNet / Inception v1 without the auxiliary heads. ``cifar`` replaces the stem
    (7x7/2 conv, pools, 1x1 and 3x3 convs) by one 3x3 conv to 192 channels."""

    def __init__(self, width: float = 1.0, num_classes: int = 1000, cifar: bool = False, dropout: float = 0.2) -> None:
        super().__init__()
        stem_ch = _ch(192, width)
        if cifar:
            stem = [BasicConv2d(3, stem_ch, 3, padding=1)]
        else:
            c64 = _ch(64, width)
            stem = [BasicConv2d(3, c64, 7, 2, 3), nn.MaxPool2d(3, 2, ceil_mode=True), BasicConv2d(c64, c64, 1),
                    BasicConv2d(c64, stem_ch, 3, padding=1), nn.MaxPool2d(3, 2, ceil_mode=True)]
        layers, in_ch = list(stem), stem_ch
        for spec in GOOGLENET_INCEPTIONS:
            if spec == "pool":
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
            elif spec == "pool2":
                layers.append(nn.MaxPool2d(2, 2, ceil_mode=True))
            else:
                block = Inception(in_ch, *(_ch(c, width) for c in spec[1:]))
                layers.append(block)
                in_ch = block.out_channels
        self.features = nn.Sequential(*layers)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(in_ch, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.fc(self.dropout(torch.flatten(x, 1)))


register_family(Family(
    name="googlenet",
    description="GoogLeNet / Inception v1 (Szegedy et al. 2015): nine inception modules; default "
    "quarter width on 32x32 images",
    knobs=_image_knobs(width=0.25),
    build=lambda c: GoogLeNet(c["width"], c["num_classes"], is_cifar(c)),
    task=lambda c: IMAGE_CLASSIFICATION,
    default_batch_size=16,
    validate=_validate_image,
))


# =========================================================================== AlexNet
class AlexNet(nn.Module):
    """AlexNet as in torchvision (one-tower, Krizhevsky 2014): 5 convs, 3 max-pools, 6x6 pool,
    4096-4096 FC with dropout. ``cifar``: 3x3 stride-1 first conv and a 3x3 pool before the FCs."""

    def __init__(self, width: float = 1.0, num_classes: int = 1000, cifar: bool = False, dropout: float = 0.5) -> None:
        super().__init__()
        c1, c2, c3, c4, c5 = (_ch(c, width) for c in (64, 192, 384, 256, 256))
        conv1 = nn.Conv2d(3, c1, 3, 1, 1) if cifar else nn.Conv2d(3, c1, 11, 4, 2)
        self.features = nn.Sequential(
            conv1, nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c3, c4, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c4, c5, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        )
        pool = 3 if cifar else 6
        hidden = _ch(4096, width)
        self.avgpool = nn.AdaptiveAvgPool2d((pool, pool))
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(c5 * pool * pool, hidden), nn.ReLU(inplace=True),
            nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


register_family(Family(
    name="alexnet",
    description="AlexNet (Krizhevsky 2014, torchvision's one-tower version): large FC layers, "
    "so many parameters for little compute; default half width on 32x32 images",
    knobs=_image_knobs(width=0.5),
    build=lambda c: AlexNet(c["width"], c["num_classes"], is_cifar(c)),
    task=lambda c: IMAGE_CLASSIFICATION,
    default_batch_size=64,
    validate=_validate_image,
))


# =========================================================================== ViT
class VisionTransformer(nn.Module):
    """ViT (Dosovitskiy et al. 2021): patch embedding (conv, kernel = stride = patch), a class
    token, learned position embeddings, pre-LN encoder layers, head on the class token."""

    def __init__(self, image_size: int = 224, patch_size: int = 16, layers: int = 12, d_model: int = 768,
                 heads: int = 12, ffn: int = 3072, num_classes: int = 1000, dropout: float = 0.0,
                 attention: str = "sdpa") -> None:
        super().__init__()
        n_patches = (image_size // patch_size) ** 2
        self.conv_proj = nn.Conv2d(3, d_model, patch_size, patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_embedding = nn.Parameter(torch.empty(1, n_patches + 1, d_model).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(*(
            TransformerLayer(d_model, heads, ffn, dropout, norm_first=True, eps=1e-6, attention=attention)
            for _ in range(layers)
        ))
        self.ln = nn.LayerNorm(d_model, eps=1e-6)
        self.head = nn.Linear(d_model, num_classes)
        fan_in = 3 * patch_size * patch_size
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        nn.init.zeros_(self.conv_proj.bias)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv_proj(x).flatten(2).transpose(1, 2)  # [B, patches, d_model]
        cls = self.class_token.expand(x.shape[0], -1, -1)
        x = self.dropout(torch.cat([cls, x], 1) + self.pos_embedding)
        x = self.ln(self.layers(x))
        return self.head(x[:, 0])


def _validate_vit(c: dict) -> str | None:
    if c["image_size"] % c["patch_size"]:
        return f"image_size={c['image_size']} must be a multiple of patch_size={c['patch_size']}"
    if c["d_model"] % c["heads"]:
        return f"d_model={c['d_model']} must be a multiple of heads={c['heads']}"
    return None


register_family(Family(
    name="vit",
    description="Vision Transformer (Dosovitskiy et al. 2021): a Transformer encoder on image "
    "patches; default 6 layers of width 192 on 32x32 images in 4x4 patches",
    knobs=(
        Knob("image_size", 32, "input height = width, px", check=_in_range(8, 1024)),
        Knob("patch_size", 4, "patch side, px", check=_in_range(1, 64)),
        Knob("layers", 6, "encoder layers", check=_in_range(1, 48)),
        Knob("d_model", 192, "hidden size (embedding width)", check=_in_range(8, 4096)),
        Knob("heads", 3, "attention heads", check=_in_range(1, 64)),
        Knob("ffn", 768, "feed-forward (MLP) hidden size", check=_in_range(8, 16384)),
        Knob("num_classes", 10, "number of output classes", check=_at_least(2)),
        Knob("dropout", 0.0, "dropout probability", check=_in_range(0.0, 0.9)),
        Knob("attention", "sdpa", "sdpa (F.scaled_dot_product_attention) or math (explicit "
             "matmul + softmax)", choices=("sdpa", "math")),
    ),
    build=lambda c: VisionTransformer(c["image_size"], c["patch_size"], c["layers"], c["d_model"], c["heads"],
                                      c["ffn"], c["num_classes"], c["dropout"], c["attention"]),
    task=lambda c: IMAGE_CLASSIFICATION,
    default_batch_size=32,
    validate=_validate_vit,
))


# =========================================================================== presets
_IMAGENET = dict(image_size=224, num_classes=1000, variant="imagenet")  # stem fixed if image_size changes
_CIFAR = dict(image_size=32, num_classes=10, variant="cifar")
for _depth in (11, 13, 16, 19):
    register_preset(f"vgg{_depth}", "vgg", f"VGG-{_depth}, ImageNet 224x224 (torchvision vgg{_depth})",
                    full_size=True, depth=_depth, batch_norm=False, width=1.0, **_IMAGENET)
    register_preset(f"vgg{_depth}_bn", "vgg", f"VGG-{_depth} with BatchNorm, ImageNet 224x224",
                    full_size=True, depth=_depth, batch_norm=True, width=1.0, **_IMAGENET)
register_preset("vgg16_cifar", "vgg", "VGG-16-BN for CIFAR-10 32x32 (one Linear head)",
                depth=16, batch_norm=True, width=1.0, batch_size=16, **_CIFAR)
for _depth in RESNET_LAYOUTS:
    register_preset(f"resnet{_depth}", "resnet", f"ResNet-{_depth}, ImageNet 224x224", full_size=True,
                    depth=_depth, **_IMAGENET)
register_preset("resnet18_cifar", "resnet", "ResNet-18 with a 3x3 stem for CIFAR-10 32x32 (11 M params)",
                depth=18, batch_size=16, **_CIFAR)
for _depth in (20, 32, 44, 56, 110):
    register_preset(f"resnet{_depth}_cifar", "resnet", f"CIFAR ResNet-{_depth} (He et al. 2016, sec. 4.2)",
                    depth=_depth, batch_size=32 if _depth <= 56 else 16, **_CIFAR)
for _name, _growth, _blocks in (("densenet121", 32, (6, 12, 24, 16)), ("densenet169", 32, (6, 12, 32, 32)),
                                ("densenet201", 32, (6, 12, 48, 32)), ("densenet161", 48, (6, 12, 36, 24))):
    register_preset(_name, "densenet", f"DenseNet-{_name[8:]}, ImageNet 224x224", full_size=True,
                    growth_rate=_growth, block_config=_blocks, **_IMAGENET)
register_preset("densenet_bc100_cifar", "densenet", "DenseNet-BC-100 (k=12) for CIFAR-10 32x32",
                growth_rate=12, block_config=(16, 16, 16), batch_size=8, **_CIFAR)
register_preset("mobilenet_v2", "mobilenetv2", "MobileNetV2 1.0, ImageNet 224x224", full_size=True,
                width=1.0, **_IMAGENET)
register_preset("mobilenet_v2_cifar", "mobilenetv2", "MobileNetV2 1.0 for CIFAR-10 32x32", width=1.0,
                batch_size=16, **_CIFAR)
register_preset("googlenet_imagenet", "googlenet", "GoogLeNet, ImageNet 224x224 (no aux heads)", full_size=True,
                width=1.0, **_IMAGENET)
register_preset("googlenet_cifar", "googlenet", "GoogLeNet for CIFAR-10 32x32 (3x3 stem)", width=1.0,
                batch_size=4, **_CIFAR)
register_preset("alexnet_imagenet", "alexnet", "AlexNet, ImageNet 224x224 (61 M params)", full_size=True,
                width=1.0, **_IMAGENET)
register_preset("alexnet_cifar", "alexnet", "AlexNet at full width for CIFAR-10 32x32", width=1.0, **_CIFAR)
register_preset("vit_b_16", "vit", "ViT-B/16, ImageNet 224x224", full_size=True, image_size=224,
                patch_size=16, layers=12, d_model=768, heads=12, ffn=3072, num_classes=1000)
register_preset("vit_tiny_cifar", "vit", "ViT-Tiny width (192, 3 heads, 12 layers), 4x4 patches on 32x32",
                layers=12, batch_size=16)
