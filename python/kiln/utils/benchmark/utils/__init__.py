"""The pieces of kiln.utils.benchmark, laid out as torch.utils.benchmark.utils: common
(TaskSpec, Measurement, units, thread control), timer (Timer) and compare (Compare)."""
