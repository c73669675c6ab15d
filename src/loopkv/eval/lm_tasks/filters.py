"""The lm-eval filter that scores the samples of a document one by one: lm-eval's default filter
for a task with `repeats` keeps only the first response (take_first); a sampled loopkv task instead
lists one filter per sample, `loopkv_nth_response` with index k, so each metric is computed on
every sample and run_task averages them per document (pass@1 over n samples)."""
from __future__ import annotations

from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter

from loopkv.errors import LoopKVError

NTH_RESPONSE = "loopkv_nth_response"


@register_filter(NTH_RESPONSE)
class NthResponse(Filter):
    def __init__(self, index: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.index = int(index)

    def apply(self, resps, docs):
        out = []
        for r in resps:
            if len(r) <= self.index:
                raise LoopKVError(f"sample {self.index} asked of a document with {len(r)} responses "
                                  f"(the task's repeats are fewer than its samples)")
            out.append(r[self.index])
        return out
