"""PanDA's memory steps for a job that ran out of memory: one definition for all.

panda-server's retry module (``increase_memory`` in
``pandaserver/taskbuffer/retryModule.py``) gives a job that failed for lack of memory
the next of these steps, MB per core, and stops at the last one. The cost choice
prices a too-small request by these retries, and the replay plays them out, so both
read the steps from here.
"""

from __future__ import annotations

#: The memory steps of PanDA's ``increase_memory`` retries, MB per core, ascending.
MEMORY_STEPS_MB: tuple[float, ...] = (1000.0, 2000.0, 3000.0, 4000.0, 6000.0, 8000.0)
