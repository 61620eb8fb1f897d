import torch
from simpler.task_interface import CallConfig, CommBufferSpec, DataType, TaskArgs, TensorArgType
from pypto.runtime.tensor_arg import make_tensor_arg
from pypto.runtime.distributed_runner import _submit_chip

def _alloc_intermediates(tensors, world_size=1):
    tensors["mid_0"] = torch.zeros((2, 16), dtype=torch.float32).share_memory_()

def host_orch(orch, _args, config, *, tensors, callables, sub_ids, _keep, world_size, _domain_provider=None):
    t__tmp_v0 = world_size
    for rank__idx_v0 in range(0, t__tmp_v0, 1):
        tensors["t__tmp_v1"] = tensors["a"][rank__idx_v0, 0:16]
        tensors["t__tmp_v2"] = tensors["mid_0"][rank__idx_v0, 0:16]
        _ta_0 = TaskArgs()
        _ta_0.add_tensor(make_tensor_arg(orch._worker, tensors["t__tmp_v1"]), TensorArgType.INPUT)
        _ta_0.add_tensor(make_tensor_arg(orch._worker, tensors["t__tmp_v2"]), TensorArgType.OUTPUT_EXISTING)
        _keep.append(_ta_0)
        _submit_chip(orch, callables["chip_a"], _ta_0, config, rank__idx_v0)
        tensors["t__tmp_v3"] = tensors["mid_0"][rank__idx_v0, 0:16]
        tensors["t__tmp_v4"] = tensors["out"][rank__idx_v0, 0:16]
        _ta_1 = TaskArgs()
        _ta_1.add_tensor(make_tensor_arg(orch._worker, tensors["t__tmp_v3"]), TensorArgType.INPUT)
        _ta_1.add_tensor(make_tensor_arg(orch._worker, tensors["t__tmp_v4"]), TensorArgType.OUTPUT_EXISTING)
        _keep.append(_ta_1)
        _submit_chip(orch, callables["chip_b"], _ta_1, config, rank__idx_v0)

host_orch._pypto_distributed_entry = True

