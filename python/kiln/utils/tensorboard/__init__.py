"""kiln.utils.tensorboard: torch.utils.tensorboard's SummaryWriter in pure Python (decision
0113). It writes TensorBoard event files (TFRecord-framed `Event` protobuf messages) with its
own protobuf encoder, CRC-32C and PNG encoder: neither the tensorboard nor the protobuf
package is needed to write logs, only to view them.

    from kiln.utils.tensorboard import SummaryWriter
    with SummaryWriter("runs/exp1") as w:
        for step in range(100):
            w.add_scalar("loss", loss, step)          # kiln tensor, numpy array or number
        w.add_histogram("weights", model.fc.weight, step)
        w.add_image("sample", img, step, dataformats="CHW")

Not imported by `import kiln`."""
from .writer import FileWriter, SummaryWriter

__all__ = ["FileWriter", "SummaryWriter"]
