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
policies=$(arg numa_lb_test.policies)
mix=$(arg numa_lb_test.mix)
seconds=$(arg numa_lb_test.seconds)
sysctl=/proc/sys/kernel/sched_numa_lb_policy

echo "TOPO online=$(cat /sys/devices/system/node/online)"
for n in /sys/devices/system/node/node[0-9]*; do
	echo "TOPO node=${n##*node} cpus=$(cat "$n/cpulist") distance=$(cat "$n/distance" | tr ' ' ,)"
done
echo "KERNEL $(uname -r)"
echo "SYSCTL initial=$(cat $sysctl 2>&1) mode=$(stat -c %a $sysctl 2>&1)"
if echo bogus > $sysctl 2>/dev/null; then res=accepted; else res=rejected; fi
echo "SYSCTL invalid=$res after=$(cat $sysctl)"
echo "SYSCTL unprivileged=$(/bin/numa_lb_stress unpriv-write $sysctl)"

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

echo "VMSTAT $(grep -E '^(numa_|pgmigrate)' /proc/vmstat | tr '\n' ' ')"
dmesg | sed 's/^/DMESG /'
echo "GUEST DONE"
poweroff -f
