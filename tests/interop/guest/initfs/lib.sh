# Shell library of the rxe guest: sourced by /init, by every scenario
# script and by every command the host runs through the agent.

# emu_mark prints a marker line the host side parses.
emu_mark() {
	echo "@@IRDMA-EMU $*"
}

# emu_notify prints a marker on the console even from a command the host
# runs through the agent (whose output goes back to the host instead), for
# the host to wait on: emu_notify "server listening".
emu_notify() {
	echo "@@IRDMA-EMU $*" >/dev/console
}

# step NAME CMD [ARG…] runs CMD with its output collected, then prints the
# output between "begin NAME" and "end NAME" markers and "step NAME rc=N".
# The output is printed in one go after CMD ends so that it is not
# interleaved with other output on the console; wrap CMD in `timeout` when
# it may hang. Returns CMD's status.
step() {
	_sn=$1
	shift
	_so=/tmp/step.$$.$_sn.out
	"$@" >"$_so" 2>&1 </dev/null
	_src=$?
	emu_mark "begin $_sn"
	cat "$_so"
	[ -s "$_so" ] && [ -n "$(tail -c 1 "$_so")" ] && echo
	emu_mark "end $_sn"
	emu_mark "step $_sn rc=$_src"
	rm -f "$_so"
	return $_src
}

# rxe_debug_on enables rdma_rxe's pr_debug messages (bad ICRC, dropped
# packets) in the kernel log; read them with dmesg.
rxe_debug_on() {
	grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs debugfs /sys/kernel/debug
	echo 'module rdma_rxe +p' >/sys/kernel/debug/dynamic_debug/control
}

# wait_tcp HOST PORT [SECONDS] waits until HOST:PORT accepts a connection.
# The probe connects, half-closes at once and waits for the server to
# close, so the server must accept more than one connection and shrug off
# one that sends nothing (ibv_rc_pingpong's server cannot: use a console
# marker and VM.WaitMarker on the host instead).
wait_tcp() {
	_wend=$(($(date +%s) + ${3:-30}))
	until timeout 5 nc -w 1 "$1" "$2" </dev/null >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_wend" ] && return 1
		usleep 250000
	done
	return 0
}

# wait_listen PORT [SECONDS] waits until a local TCP socket listens on
# PORT, without connecting to it (ibv_rc_pingpong's server accepts exactly
# one connection, which a probe would use up).
wait_listen() {
	_wend=$(($(date +%s) + ${2:-30}))
	until netstat -ltn 2>/dev/null | grep -q ":$1 "; do
		[ "$(date +%s)" -ge "$_wend" ] && return 1
		usleep 100000
	done
	return 0
}

# agent TTY serves commands from the host on TTY until POWEROFF or end of
# input. Run it as a child of init (not in init itself), so that the
# workers it orphans are reaped by init, not by the reading shell. Requests are single lines:
#   RUN ID BASE64-SCRIPT   run the script in its own session, in background
#   KILL ID                SIGTERM, then SIGKILL, the script's session
#   POWEROFF               leave the loop
# A script runs as a background job of a non-interactive shell, so it and
# its children ignore SIGINT and SIGQUIT: end programs with SIGTERM
# (`timeout 5 prog`, not `timeout -s INT`).
# Each RUN gets one reply, written under a lock so that replies of
# concurrent commands do not interleave:
#   @@IRDMA-EMU begin ID / base64 of stdout+stderr / @@IRDMA-EMU end ID rc=N
agent() {
	_tty=$1
	# Hold the port open from before "agent ready" to the end: a serial
	# port drops what arrives while no one has it open, and the host may
	# send its first request the moment it sees the marker.
	exec 3<>"$_tty"
	stty raw -echo <&3 || fatal "stty $_tty"
	mkdir -p /tmp/agent
	emu_mark "agent ready"
	while read -r _verb _id _arg <&3; do
		case "$_verb" in
		RUN)
			# Logged on the console, so a lost request or reply shows there.
			emu_mark "agent run $_id"
			# Double fork, waiting for the middle process: the worker is
			# reparented to init, so its exit never signals this shell. A
			# SIGCHLD arriving while busybox's read builtin is inside a line
			# makes it restart the line and lose what it had read: the
			# request would vanish.
			(agent_run "$_id" "$_arg" "$_tty" >/dev/null 2>&1 3>&- &)
			;;
		KILL) (agent_kill "$_id" >/dev/null 2>&1 3>&- &) ;;
		POWEROFF) break ;;
		esac
	done
	exec 3>&-
}

agent_run() {
	_d=/tmp/agent/$1
	echo "$2" | base64 -d >"$_d.sh"
	setsid sh -c '. /etc/irdma-emu/lib.sh; . "$0"' "$_d.sh" >"$_d.out" 2>&1 </dev/null &
	_pid=$!
	echo "$_pid" >"$_d.pid"
	wait "$_pid"
	_rc=$?
	until mkdir /tmp/agent/lock 2>/dev/null; do usleep 10000; done
	{
		echo "@@IRDMA-EMU begin $1"
		base64 "$_d.out"
		echo "@@IRDMA-EMU end $1 rc=$_rc"
	} >"$3"
	rmdir /tmp/agent/lock
	emu_notify "agent done $1 rc=$_rc"
	rm -f "$_d.sh" "$_d.out" "$_d.pid"
}

agent_kill() {
	[ -r "/tmp/agent/$1.pid" ] || return 0
	read -r _kp <"/tmp/agent/$1.pid"
	kill -TERM -- "-$_kp" 2>/dev/null
	sleep 2
	kill -KILL -- "-$_kp" 2>/dev/null
	return 0
}
