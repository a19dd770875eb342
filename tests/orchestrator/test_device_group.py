"""``execution.device_group`` (workers/stacked.py) travels from the spec to the worker, and a
row says the group size it trained at: on a CPU, where the lanes decide, null."""

from __future__ import annotations

import pytest

from attnsweep.orchestrator.executors import LocalExecutor
from attnsweep.orchestrator.packing import Pack
from attnsweep.orchestrator.spec import ExecutionSettings
from attnsweep.workers import BooleanTrialConfig


def test_a_cpu_row_records_no_group_size_whatever_the_setting():
    configs = tuple(BooleanTrialConfig(task="and", T=8, s=2, m=16, seed=i, max_epochs=5, n_test=100) for i in range(2))
    executor = LocalExecutor(ExecutionSettings(device_group=256))
    handle = executor.submit(Pack(ids=("a", "b"), configs=configs))
    [(_, rows)] = executor.wait([handle], 60)
    assert [(r["status"], r["device"], r["device_group"]) for r in rows] == [("done", "cpu", None)] * 2


@pytest.mark.parametrize("value", [0, 5000, 1.5, "32"])
def test_a_group_size_out_of_range_names_the_field_and_the_range(value):
    with pytest.raises(ValueError, match="device_group"):
        ExecutionSettings(device_group=value)
