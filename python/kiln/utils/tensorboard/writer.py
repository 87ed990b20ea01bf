"""SummaryWriter and FileWriter, as torch.utils.tensorboard.writer (torch 2.13)."""
import os
import time

from . import _summary as S
from ._embedding import write_embedding
from ._event_file import SESSION_LOG_START, FILE_VERSION, EventFileWriter, encode_event

__all__ = ["FileWriter", "SummaryWriter"]


class FileWriter:
    """One event file in `log_dir` (torch's FileWriter, over encoded messages instead of
    protobuf objects): add_summary takes encoded `Summary` bytes, add_event encoded `Event`
    bytes (written as they are)."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        log_dir = os.fspath(log_dir)
        if isinstance(log_dir, bytes):
            log_dir = os.fsdecode(log_dir)
        self.event_writer = EventFileWriter(log_dir, max_queue, flush_secs, filename_suffix)

    def get_logdir(self):
        return self.event_writer.get_logdir()

    def add_event(self, event_bytes):
        self.event_writer.add_event(event_bytes)

    def _add(self, step=None, walltime=None, **fields):
        wall_time = time.time() if walltime is None else float(walltime)
        self.event_writer.add_event(
            encode_event(wall_time, None if step is None else int(step), **fields))

    def add_summary(self, summary, global_step=None, walltime=None):
        """Wrap encoded Summary bytes in an Event (wall time now unless `walltime`)."""
        self._add(global_step, walltime, summary=bytes(summary))

    def add_graph(self, *args, **kwargs):
        raise NotImplementedError(_GRAPH_MESSAGE)

    add_onnx_graph = add_graph

    def flush(self):
        self.event_writer.flush()

    def close(self):
        self.event_writer.close()

    def reopen(self):
        self.event_writer.reopen()


_GRAPH_MESSAGE = (
    "kiln.utils.tensorboard does not write graphs: torch's add_graph traces the model with "
    "torch.jit and writes a GraphDef, and kiln has no TorchScript tracer (kiln.fx traces, but "
    "its graphs are not converted to GraphDef)")


class SummaryWriter:
    """Writes scalars, histograms, images, text, hparams, PR curves and embeddings to
    TensorBoard event files in `log_dir`, as torch.utils.tensorboard.SummaryWriter.

    Values may be kiln tensors, numpy arrays or Python numbers. The default log_dir is
    runs/<Mon DD_HH-MM-SS>_<host><comment>. `purge_step` writes torch's two events at that
    step (file_version and SessionLog START) so that TensorBoard hides later events of a
    crashed run. Events reach the file when `max_queue` are pending, every `flush_secs`, and
    on flush() / close(); the writer is a context manager that closes on exit."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix=""):
        if not log_dir:
            import socket
            from datetime import datetime
            current_time = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", current_time + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()
        self.default_bins = S.default_bins()

    def _get_file_writer(self):
        """The default FileWriter; a new one (a new event file) after close()."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                step = self.purge_step
                self.file_writer._add(step, file_version=FILE_VERSION)
                self.file_writer._add(step, session_log_status=SESSION_LOG_START)
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        return self.log_dir

    # ------------------------------------------------------------------------- scalars

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One scalar (a number, or a one-element tensor / array). new_style writes it as a
        float tensor (a double one with double_precision) under the "scalars" plugin."""
        S.check_tag(tag)
        summary = S.scalar(tag, scalar_value, new_style=new_style,
                           double_precision=double_precision)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several scalars in one chart: each goes, tagged main_tag, to its own event file in
        the subdirectory <log_dir>/<main_tag with '/' -> '_'>_<tag>, as torch."""
        S.check_tag(main_tag, "main_tag")
        if not isinstance(tag_scalar_dict, dict):
            raise TypeError("tag_scalar_dict must be a dict {tag: value}, got "
                            f"{type(tag_scalar_dict).__name__}")
        for tag in tag_scalar_dict:
            S.check_tag(tag)
        values = {tag: S.scalar(main_tag, v) for tag, v in tag_scalar_dict.items()}
        walltime = time.time() if walltime is None else walltime
        fw_logdir = self._get_file_writer().get_logdir()
        for tag, summary in values.items():
            fw_tag = fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = self.all_writers.get(fw_tag)
            if fw is None:
                fw = FileWriter(fw_tag, self.max_queue, self.flush_secs, self.filename_suffix)
                self.all_writers[fw_tag] = fw
            fw.add_summary(summary, global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None):
        """The whole tensor as a TensorProto under the "tensor" plugin."""
        S.check_tag(tag)
        self._get_file_writer().add_summary(S.tensor_proto(tag, tensor), global_step, walltime)

    # ---------------------------------------------------------------------- histograms

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        """Histogram of `values`; bins 'tensorflow' (default) are TensorFlow's exponential
        buckets, anything else is passed to numpy.histogram ('auto', 'fd', a count, edges)."""
        S.check_tag(tag)
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._get_file_writer().add_summary(S.histogram(tag, values, bins, max_bins=max_bins),
                                            global_step, walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits,
                          bucket_counts, global_step=None, walltime=None):
        """A histogram given by its statistics and buckets (right limits and counts)."""
        S.check_tag(tag)
        summary = S.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits,
                                  bucket_counts)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    # -------------------------------------------------------------------------- images

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """One image, PNG-encoded: dataformats CHW (default), HWC, HW or a permutation; C is
        1 (gray, written as RGB), 2 (gray + alpha), 3 (RGB) or 4 (RGBA). uint8 values are
        used as they are, any other dtype is taken to be in [0, 1] (scaled by 255, clipped)."""
        S.check_tag(tag)
        self._get_file_writer().add_summary(S.image(tag, img_tensor, dataformats=dataformats),
                                            global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """A batch of images (NCHW or NHWC, C 1 or 3) tiled into one grid image, 8 a row."""
        S.check_tag(tag)
        self._get_file_writer().add_summary(S.image(tag, img_tensor, dataformats=dataformats),
                                            global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """A matplotlib figure (or a list of them, tiled) rendered to an image; needs
        matplotlib."""
        if isinstance(figure, list):
            self.add_image(tag, S.figure_to_image(figure, close), global_step, walltime,
                           dataformats="NCHW")
        else:
            self.add_image(tag, S.figure_to_image(figure, close), global_step, walltime,
                           dataformats="CHW")

    def add_image_with_boxes(self, *args, **kwargs):
        raise NotImplementedError(
            "kiln.utils.tensorboard.SummaryWriter.add_image_with_boxes is not implemented "
            "(torch draws the boxes and labels with PIL); draw them into the image and use "
            "add_image")

    def add_video(self, *args, **kwargs):
        raise NotImplementedError(
            "kiln.utils.tensorboard.SummaryWriter.add_video is not implemented (torch encodes "
            "an animated GIF with moviepy); write frames with add_images")

    def add_mesh(self, *args, **kwargs):
        raise NotImplementedError(
            "kiln.utils.tensorboard.SummaryWriter.add_mesh is not implemented")

    # ------------------------------------------------------------------- text, audio, ...

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Text (markdown in TensorBoard), under the tag `tag + "/text_summary"` as torch."""
        S.check_tag(tag)
        self._get_file_writer().add_summary(S.text(tag, text_string), global_step, walltime)

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        """Mono audio (shape (L,) or (1, L), values in [-1, 1]) as a 16-bit WAV."""
        S.check_tag(tag)
        self._get_file_writer().add_summary(S.audio(tag, snd_tensor, sample_rate=sample_rate),
                                            global_step, walltime)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127,
                     weights=None, walltime=None):
        """Precision-recall curve of binary `labels` against `predictions` in [0, 1]."""
        S.check_tag(tag)
        summary = S.pr_curve(tag, labels, predictions, num_thresholds, weights)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts,
                         true_negative_counts, false_negative_counts, precision, recall,
                         global_step=None, num_thresholds=127, weights=None, walltime=None):
        S.check_tag(tag)
        summary = S.pr_curve_raw(tag, true_positive_counts, false_positive_counts,
                                 true_negative_counts, false_negative_counts, precision,
                                 recall, num_thresholds)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_custom_scalars(self, layout):
        """A custom-scalars layout {category: {chart: ['Multiline' | 'Margin', tags]}}."""
        if not isinstance(layout, dict):
            raise TypeError(f"layout must be a dict, got {type(layout).__name__}")
        self._get_file_writer().add_summary(S.custom_scalars(layout))

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        self.add_custom_scalars({category: {title: ["Multiline", tags]}})

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        if len(tags) != 3:
            raise S.DataFormatError(f"Expected 3 tags, got {len(tags)}.")
        self.add_custom_scalars({category: {title: ["Margin", tags]}})

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None,
                    run_name=None, global_step=None):
        """Hyperparameters and their metrics for TensorBoard's HPARAMS tab, written as torch
        does: to a new event file in <log_dir>/<run_name> (run_name defaults to the current
        time) holding the experiment, session-start and session-end summaries and one
        scalar per metric. Values may be int, float, str, bool (written as numbers, as torch)
        or one-element tensors; None values are skipped."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = S.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        metric_summaries = [(S.check_tag(k), S.scalar(k, v)) for k, v in metric_dict.items()]
        if not run_name:
            run_name = str(time.time())
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name)
        with SummaryWriter(log_dir=logdir) as w_hp:
            fw = w_hp.file_writer
            fw.add_summary(exp, global_step)
            fw.add_summary(ssi, global_step)
            fw.add_summary(sei, global_step)
            for _, summary in metric_summaries:
                fw.add_summary(summary, global_step)

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None,
                      tag="default", metadata_header=None):
        """Embedding projector data in <log_dir>/<step:05d>/<tag>/: tensors.tsv, metadata.tsv
        (labels, or rows under `metadata_header`), sprite.png (label_img N x C x H x W), and
        the projector_config.pbtxt in log_dir listing every embedding added."""
        S.check_tag(tag)
        if not hasattr(self, "_projector_config"):
            self._projector_config = []
        write_embedding(self._get_file_writer().get_logdir(), self._projector_config, mat,
                        metadata, label_img, global_step, tag, metadata_header)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        raise NotImplementedError(_GRAPH_MESSAGE)

    def add_onnx_graph(self, prototxt):
        raise NotImplementedError(_GRAPH_MESSAGE)

    # --------------------------------------------------------------------------- files

    def flush(self):
        """Write every pending event of every file of this writer to disk."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()

    def close(self):
        """Flush and close every file; a later add_* opens a new event file (as torch)."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()
