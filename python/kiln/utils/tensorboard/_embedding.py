"""add_embedding's files, as torch.utils.tensorboard._embedding writes them: tensors.tsv,
metadata.tsv, sprite.png under <log_dir>/<global_step:05d>/<tag>/ and projector_config.pbtxt
(protobuf text format of tensorboard.projector.ProjectorConfig, written here by hand in the
layout protobuf's text_format.MessageToString produces)."""
import math
import os

import numpy as np

from ._png import encode_png
from ._summary import DataFormatError, make_grid, make_np


def _encode_tag(raw):
    """torch's SummaryWriter._encode: '%', '/' and '\\' percent-encoded (a directory name)."""
    return raw.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _text_escape(s):
    """protobuf text format's string escaping (CEscape of the UTF-8 bytes, as_utf8=False)."""
    out = []
    for b in s.encode("utf-8"):
        ch = chr(b)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "\"'\\":
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append("\\%03o" % b)
    return "".join(out)


def _pbtxt(embeddings):
    """ProjectorConfig{embeddings 2: [EmbeddingInfo{tensor_name 1, metadata_path 2,
    sprite 5 {image_path 1, single_image_dim 2}, tensor_path 6}]} in text format."""
    lines = []
    for e in embeddings:
        lines.append("embeddings {")
        lines.append(f'  tensor_name: "{_text_escape(e["tensor_name"])}"')
        if "metadata_path" in e:
            lines.append(f'  metadata_path: "{_text_escape(e["metadata_path"])}"')
        if "sprite" in e:
            image_path, dims = e["sprite"]
            lines.append("  sprite {")
            lines.append(f'    image_path: "{_text_escape(image_path)}"')
            lines.extend(f"    single_image_dim: {d}" for d in dims)
            lines.append("  }")
        lines.append(f'  tensor_path: "{_text_escape(e["tensor_path"])}"')
        lines.append("}")
    return "".join(line + "\n" for line in lines)


def _make_tsv(metadata, save_path, metadata_header=None):
    if not metadata_header:
        rows = [str(x) for x in metadata]
    else:
        if any(len(row) != len(metadata_header) for row in metadata):
            raise DataFormatError(
                "len of header must be equal to the number of columns in metadata")
        rows = ["\t".join(str(e) for e in row) for row in [metadata_header] + list(metadata)]
    with open(os.path.join(save_path, "metadata.tsv"), "wb") as f:
        f.write(("\n".join(rows) + "\n").encode("utf-8"))


def _make_sprite(label_img, save_path):
    """The label images tiled in a square grid (ceil(sqrt(N)) a row) on a square canvas."""
    nrow = math.ceil(label_img.shape[0] ** 0.5)
    grid_chw = make_grid(label_img, ncols=nrow)
    side = grid_chw.shape[2]
    grid_hwc = grid_chw.transpose(1, 2, 0)
    if grid_hwc.shape[0] > side:
        raise DataFormatError(
            f"label_img of shape {label_img.shape} does not fit a square sprite "
            "(images taller than wide)")
    square = np.zeros((side, side, 3))
    square[:grid_hwc.shape[0], :, :] = grid_hwc
    with open(os.path.join(save_path, "sprite.png"), "wb") as f:
        f.write(encode_png(np.uint8((square * 255).clip(0, 255))))


def _make_mat(mat, save_path):
    with open(os.path.join(save_path, "tensors.tsv"), "wb") as f:
        for row in mat.tolist():
            f.write(("\t".join(str(x) for x in row) + "\n").encode("utf-8"))


def write_embedding(logdir, config, mat, metadata, label_img, global_step, tag,
                    metadata_header):
    """Writes one embedding's files and rewrites projector_config.pbtxt; `config` is the
    writer's list of the embeddings written so far (appended to)."""
    mat = make_np(mat)
    if mat.ndim != 2:
        raise DataFormatError(
            f"mat should be 2D, where mat.size(0) is the number of data points; got shape "
            f"{mat.shape}")
    if metadata is not None and mat.shape[0] != len(metadata):
        raise DataFormatError(f"#labels should equal with #data points: {len(metadata)} "
                              f"labels for {mat.shape[0]} points")
    if label_img is not None:
        label_img = make_np(label_img)
        if label_img.ndim != 4 or mat.shape[0] != label_img.shape[0]:
            raise DataFormatError(
                f"label_img must be N x C x H x W with N = {mat.shape[0]} (the number of "
                f"data points), got shape {label_img.shape}")
    if global_step is None:
        global_step = 0
    subdir = f"{str(global_step).zfill(5)}/{_encode_tag(tag)}"
    save_path = os.path.join(logdir, subdir)
    if os.path.exists(save_path):
        if os.path.isdir(save_path):
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        else:
            raise NotADirectoryError(
                f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
    else:
        os.makedirs(save_path)
    info = {"tensor_name": f"{tag}:{str(global_step).zfill(5)}",
            "tensor_path": subdir + "/tensors.tsv"}
    if metadata is not None:
        _make_tsv(metadata, save_path, metadata_header=metadata_header)
        info["metadata_path"] = subdir + "/metadata.tsv"
    if label_img is not None:
        _make_sprite(label_img, save_path)
        info["sprite"] = (subdir + "/sprite.png", [label_img.shape[3], label_img.shape[2]])
    _make_mat(mat, save_path)
    config.append(info)
    with open(os.path.join(logdir, "projector_config.pbtxt"), "wb") as f:
        f.write(_pbtxt(config).encode("utf-8"))
