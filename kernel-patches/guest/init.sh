#!/bin/busybox sh
# PID 1 of the kernel's QEMU test guest (initramfs).  Prints tagged lines on
# the serial console that the host parses; the policies to exercise and the
# load come on the kernel command line:
#   numa_lb_test.policies=default,tm,...  numa_lb_test.mix=T:MiB,T:MiB,...
#   numa_lb_test.seconds=N
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null

arg() {
	for word in $(cat /proc/cmdline); do
		case "$word" in "$1="*) echo "${word#*=}" | tr , ' '; return ;; esac
	done
}
# /proc/interrupts rows per CPU: HLT (idle HLTs stepped over, patch 0025,
# in every variant) must stay 0 where STI's interrupt shadow is modelled,
# while RES and LOC show the wake-ups it had the chance to act on.
irq_rows() {
	for r in HLT RES LOC; do
		echo "IRQROW $r $(awk -v r="$r:" '$1 == r { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) printf "%s ", $i }' /proc/interrupts)"
	done
}
# Page-fault benchmark boot (qemu_check.py faultbench): nothing else runs,
# and it needs no sysctl of ours, so the stock kernel boots it too.
faultbench=$(arg numa_lb_test.faultbench)
if [ -n "$faultbench" ]; then
	echo "KERNEL $(uname -r)"
	# Which policies this kernel offers: stock has no sysctl, nokmlb
	# refuses the RSS-based ones (and says why in the kernel log).
	sysctl=/proc/sys/kernel/sched_numa_lb_policy
	for p in default tm mb bce mbplus excl_base excl null mbplus_ff excl_ff; do
		if [ ! -e $sysctl ]; then res=absent
		elif err=$( { echo $p > $sysctl; } 2>&1 ); then res=ok
		else res=$(echo "${err##*: }" | tr ' ' _)
		fi
		echo "POLICYWRITE $p=$res"
	done
	[ -e $sysctl ] && echo default > $sysctl
	reps=$(arg numa_lb_test.reps)
	for r in $(seq 1 "${reps:-3}"); do
		for t in $faultbench; do
			/bin/fault_bench "$t" "$(arg numa_lb_test.seconds)" "$r"
		done
	done
	irq_rows
	echo "GUEST DONE"
	poweroff -f
fi
policies=$(arg numa_lb_test.policies)
mix=$(arg numa_lb_test.mix)
seconds=$(arg numa_lb_test.seconds)
sysctl=/proc/sys/kernel/sched_numa_lb_policy
# The balancer's window (sched/nr_migrate, debugfs) for the whole run, if given
nr_migrate=$(arg numa_lb_test.nr_migrate)
if [ -n "$nr_migrate" ]; then
	echo "$nr_migrate" > /sys/kernel/debug/sched/nr_migrate
	echo "SYSCTL nr_migrate=$(cat /sys/kernel/debug/sched/nr_migrate)"
fi

echo "TOPO online=$(cat /sys/devices/system/node/online)"
for n in /sys/devices/system/node/node[0-9]*; do
	echo "TOPO node=${n##*node} cpus=$(cat "$n/cpulist") distance=$(cat "$n/distance" | tr ' ' ,)"
done
echo "KERNEL $(uname -r)"
# Per-process kernel memory: the slab objects a process costs
for c in mm_struct signal_cache task_struct; do
	d=/sys/kernel/slab/$c
	[ -e $d ] && echo "SLAB $c object_size=$(cat $d/object_size) slab_size=$(cat $d/slab_size)"
done
echo "SYSCTL initial=$(cat $sysctl 2>&1) mode=$(stat -c %a $sysctl 2>&1)"
if echo bogus > $sysctl 2>/dev/null; then res=accepted; else res=rejected; fi
echo "SYSCTL invalid=$res after=$(cat $sysctl)"
# Malformed writes fail with EINVAL and leave the policy alone (mb, so that
# "unchanged" is not "back to the default"); so does a write as non-root.
echo mb > $sysctl
for c in empty 4k upper offset nul tail; do
	echo "SYSCTL write_$c=$(/bin/numa_lb_stress sysctl-write $sysctl $c) after_$c=$(cat $sysctl)"
done
echo "SYSCTL unprivileged=$(/bin/numa_lb_stress unpriv-write $sysctl) after_unprivileged=$(cat $sysctl)"
# One trailing newline is fine.
echo "SYSCTL write_newline=$(/bin/numa_lb_stress sysctl-write $sysctl newline) after_newline=$(cat $sysctl)"
echo default > $sysctl
echo "SYSCTL reset=$(cat $sysctl)"
# The gem5 context-switch marks (patch 0024): QEMU boots without numa_lb_m5=1,
# so turning them on fails with ENODEV; 2 is EINVAL; non-root cannot open it.
m5=/proc/sys/kernel/numa_lb_m5_switch
if [ -e $m5 ]; then
	echo "SYSCTL m5_initial=$(cat $m5) m5_mode=$(stat -c %a $m5) m5_on=$(/bin/numa_lb_stress sysctl-set $m5 1) m5_two=$(/bin/numa_lb_stress sysctl-set $m5 2) m5_off=$(/bin/numa_lb_stress sysctl-set $m5 0) m5_unprivileged=$(/bin/numa_lb_stress unpriv-write $m5) m5_after=$(cat $m5)"
else
	echo "SYSCTL m5=absent"
fi
# numa_lb_migrations, numa_lb_threads and numa_rss take numa_maps' access
# check, at open time
for f in numa_lb_migrations numa_lb_threads numa_rss numa_maps; do
	echo "ACCESS file=$f $(/bin/numa_lb_stress unpriv-read /proc/1/$f)"
done
echo "ACCESS file=after_exec $(/bin/numa_lb_stress exec-read)"

for p in $policies; do
	echo "$p" > $sysctl
	echo "POLICY $p set=$(cat $sysctl)"
	sed "s/^/STATS_BEFORE $p /" /proc/sched_numa_lb_stats
	i=0
	for m in $mix; do
		/bin/numa_lb_stress "${m%%:*}" "${m##*:}" "$seconds" "$p-$i" &
		i=$((i + 1))
	done
	wait
	sed "s/^/STATS_AFTER $p /" /proc/sched_numa_lb_stats
done

# The balancing pass's bounds (patch 0018), under each policy of
# numa_lb_test.crowd: more tasks on CPU 0 than the balancer's window of 32,
# first all pinned there (nothing may move: loop_max and LBF_ALL_PINNED
# must end each pass), then free to move with sched/nr_migrate at 64 (a
# pass looks in two chunks of 32)
nrm=/sys/kernel/debug/sched/nr_migrate
for p in $(arg numa_lb_test.crowd); do
	echo "$p" > $sysctl
	sed "s/^/STATS_BEFORE crowd-pinned-$p /" /proc/sched_numa_lb_stats
	/bin/numa_lb_stress crowd 48 pinned "$seconds" "crowd-pinned-$p"
	sed "s/^/STATS_AFTER crowd-pinned-$p /" /proc/sched_numa_lb_stats
	nr_migrate=$(cat $nrm)
	echo 64 > $nrm
	sed "s/^/STATS_BEFORE crowd-free-$p /" /proc/sched_numa_lb_stats
	/bin/numa_lb_stress crowd 72 free "$seconds" "crowd-free-$p"
	sed "s/^/STATS_AFTER crowd-free-$p /" /proc/sched_numa_lb_stats
	echo "$nr_migrate" > $nrm
done
echo default > $sysctl

# kMLB's counts against the pages' real nodes: move_pages, migrate_pages,
# copy-on-write, a fork and thread storm, munmap (NUMA balancing off); the
# per-group thread counts against the threads' real nodes in the storm
/bin/numa_lb_stress accounting acct-0

# NUMA balancing on, one thread pinned away from its pages: the pages it
# moves are the process's numa_pages_migrated.
vm() { grep "^$1 " /proc/vmstat | cut -d' ' -f2; }
nb=/sys/kernel/debug/sched/numa_balancing
if [ -w /proc/sys/kernel/numa_balancing ]; then
	[ -d $nb ] && echo 0 > $nb/scan_delay_ms && echo 100 > $nb/scan_period_min_ms
	before=$(vm numa_pages_migrated)
	echo 1 > /proc/sys/kernel/numa_balancing
	/bin/numa_lb_stress numa-pages 8 "$seconds" numabal-0
	echo 0 > /proc/sys/kernel/numa_balancing
	echo "NUMABAL vmstat_numa_pages_migrated=$(( $(vm numa_pages_migrated) - before ))"
fi

echo "VMSTAT $(grep -E '^(numa_|pgmigrate)' /proc/vmstat | tr '\n' ' ')"
irq_rows
dmesg | sed 's/^/DMESG /'
echo "GUEST DONE"
poweroff -f
