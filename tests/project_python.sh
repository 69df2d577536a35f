# Sourced by tests/run, tests/slurm/run and tests/slurm_multinode/run (cwd: the
# clone). Sets py to the project's Python, picked as analysis/project_python.py
# picks it: $NUMA_LB_PYTHON, else the clone's .venv (made by .ci/setup), else
# the python3 on PATH.
if [ -n "${NUMA_LB_PYTHON:-}" ]; then
  py=$NUMA_LB_PYTHON
elif [ -x .venv/bin/python ]; then
  py=$PWD/.venv/bin/python
else
  py=python3
fi
