#!/usr/bin/env bash
# Installs the Debian packages of the Slurm test tier (slurmctld, slurmd, the
# client commands and munge). Idempotent: with everything present it only checks.
# The daemons are NOT started here: tests/slurm/test_slurm_executor.py starts a
# private single-node cluster (own config, spool and state dirs, own munge key
# and socket) and stops it at the end.
set -euo pipefail
pkgs=(slurm-wlm slurmctld slurmd slurm-client munge)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup_slurm: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  # No daemon may start from the package scripts in a container; policy-rc.d
  # is left alone if it exists, the test starts its own daemons anyway.
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
for exe in slurmctld slurmd sbatch squeue sacct scontrol munged; do
  command -v "$exe" >/dev/null || { [ -x "/usr/sbin/$exe" ] || { echo "setup_slurm: $exe missing after install" >&2; exit 1; }; }
done
echo "setup_slurm: ok"
