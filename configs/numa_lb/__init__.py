"""NUMA machine description for the numa-lb-study gem5 configurations.

The modules in this package are split in two groups:

* pure Python (no gem5 import): ``units``, ``caches``, ``memory_map``,
  ``numa_factor``, ``kernel_cmdline``, ``topology``, ``acpi``, ``roi``,
  ``ruby_requests``, ``counter_bridge`` (handed gem5's live statistics by the
  run script). They describe the
  machine and produce the bytes and strings the guest sees, and are unit-tested
  with a plain CPython.
* gem5 components (import ``m5``/``gem5``; only usable inside ``gem5.opt``):
  ``hammer_hierarchy``, ``numa_board``.

Importing this package imports nothing from gem5.
"""
