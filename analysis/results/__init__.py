"""From run directories to findings: parse, tidy, measure, report.

Modules in data-flow order: ``gem5stats`` and ``guest`` (parsers of gem5's
stats/config and of the guest's result files), ``frames`` (run directories ->
tidy pandas frames), ``metrics`` (the one definition of every metric),
``report`` (HTML + Markdown; its parts ``reference``, ``sections``,
``figures``, ``document``) and ``plots``. Beside them: ``calibration`` (the
NUMA-factor table from calibration runs), ``machine_bench`` and ``bench``
(benchmarks of the simulated machine and of the report pipeline).
"""
