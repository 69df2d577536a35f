"""The sweep engine: spec -> points -> runs -> executor -> backend -> run directories.

Modules in data-flow order: ``spec`` (TOML specs and presets, validation),
``point`` (one serializable sweep point and its content-hashed run id),
``matrix`` (spec -> runs and guest jobs), ``driver`` (plans, resumes and reports
a sweep), ``executors`` / ``slurm`` (local process pool, sbatch arrays),
``worker`` (runs one point), ``backends`` (qemu and gem5), ``provenance``
(versions and hashes of every input), ``rundir`` (status and files of one run).
"""
