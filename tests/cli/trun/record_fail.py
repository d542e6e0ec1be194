"""Run under trun --log-dir: rank 1 raises inside a function wrapped with
PyTorch's @record, which writes the exception to TORCHELASTIC_ERROR_FILE."""
import os
import time

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    if os.environ["RANK"] == "1":
        raise ValueError("boom from rank 1")
    time.sleep(60)


main()
