#!/bin/busybox sh
# /init of the rxe guest built by tests/interop/guest.
#
# Brings up a soft-RoCE device and reports over the serial console with
# "@@IRDMA-EMU …" markers that the host side parses:
#   @@IRDMA-EMU ready rxe0 PORT_ACTIVE …    the device is usable
#   @@IRDMA-EMU scenario NAME rc=N           a scenario script finished
#   @@IRDMA-EMU agent ready                  commands may be sent on ttyS1
#   @@IRDMA-EMU fatal …                      bring-up failed; powering off
#   @@IRDMA-EMU poweroff                     the last line before power-off
# Settings come from the kernel command line (emu.addr=, emu.host=,
# emu.agent=, emu.debug=). Scenario scripts ride in a second cpio archive
# as /scenario/*.sh and run in name order.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /root /bin /sbin /usr/bin /usr/sbin
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
# Links for busybox's applets where no package file exists (the real
# /bin/ip stays); busybox sh prefers its own applets anyway, so scripts call
# /sbin/ip explicitly.
/bin/busybox --install -s
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts

. /etc/irdma-emu/lib.sh

fatal() {
	emu_mark "fatal $*"
	dmesg | tail -n 30
	emu_mark "poweroff"
	poweroff -f
	sleep 60
}

EMU_ADDR=""
EMU_HOST=""
EMU_AGENT=0
EMU_DEBUG=0
for w in $(cat /proc/cmdline); do
	case "$w" in
	emu.addr=*) EMU_ADDR=${w#emu.addr=} ;;
	emu.host=*) EMU_HOST=${w#emu.host=} ;;
	emu.agent=*) EMU_AGENT=${w#emu.agent=} ;;
	emu.debug=*) EMU_DEBUG=${w#emu.debug=} ;;
	esac
done
[ -n "$EMU_ADDR" ] || fatal "no emu.addr= on the kernel command line"
EMU_GUEST=${EMU_ADDR%/*}
export EMU_ADDR EMU_HOST EMU_GUEST
emu_mark "init start kernel=$(uname -r)"

while read -r m; do
	insmod "$m" || fatal "insmod $m failed"
done </etc/irdma-emu/modules
emu_mark "modules loaded"

/sbin/ip link set lo up
i=0
while [ ! -e /sys/class/net/eth0 ]; do
	i=$((i + 1))
	[ $i -gt 200 ] && fatal "eth0 did not appear"
	usleep 50000
done
/sbin/ip addr add "$EMU_ADDR" dev eth0 || fatal "ip addr add $EMU_ADDR"
/sbin/ip link set eth0 up || fatal "ip link set eth0 up"
rdma link add rxe0 type rxe netdev eth0 || fatal "rdma link add rxe0"
i=0
while :; do
	st=""
	[ -r /sys/class/infiniband/rxe0/ports/1/state ] && read -r st </sys/class/infiniband/rxe0/ports/1/state
	case "$st" in *ACTIVE*) break ;; esac
	i=$((i + 1))
	[ $i -gt 200 ] && fatal "rxe0 port state '$st' after 10 s"
	usleep 50000
done
[ "$EMU_DEBUG" = 1 ] && rxe_debug_on
emu_mark "ready rxe0 PORT_ACTIVE addr=$EMU_ADDR uptime=$(cut -d' ' -f1 /proc/uptime)"

for s in /scenario/*.sh; do
	[ -e "$s" ] || continue
	name=${s##*/}
	name=${name%.sh}
	emu_mark "scenario $name begin"
	sh -c '. /etc/irdma-emu/lib.sh; . "$0"' "$s" </dev/null
	emu_mark "scenario $name rc=$?"
done

if [ "$EMU_AGENT" = 1 ]; then
	agent /dev/ttyS1 &
	wait $!
fi

emu_mark "poweroff"
sync
poweroff -f
sleep 60
