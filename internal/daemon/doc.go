// Package daemon is the irdma-emu daemon behind `irdma-emu run`: one emulated
// irdma function on a real network, wired together from the project's blocks,
// and the control socket its tools talk to. docs/daemon.md is the user's view;
// this comment is the map.
//
// # Wiring
//
//	netport.Port ──(netdev: MAC, MTU, addresses, carrier)──▶ driver.Device
//	     │ Events                                                │ CQP, registers
//	     ▼                                                       ▼
//	port loop ──SetUp/SetAddrs──▶ portLink ──▶ udp.Link     device.Device ◀── engine.Engine
//	     │        SetGIDs ─────────────────────────────────────────────────────▲
//	     ├──▶ sysfs tree rewrite (<run-dir>/<name>/sysfs)         portLink ────┘ (AttachLink)
//	     └──▶ port events to user contexts (the attach handler)
//
// Start brings the pieces up in dependency order — port model, device,
// driver (bring-up through the hardware interface), engine and link, sysfs
// tree, attach socket, control socket — and unwinds what it made when a step
// fails. Close tears down in reverse after moving every QP to the error
// state (see Close).
//
// The netdev the driver reads is the port model behind a thin wrapper that
// can also be forced down (`link down` on the control socket), so the
// driver's QUERY_PORT, the sysfs tree, the link and the engine always agree
// on one port state.
//
// # The port's link
//
// The engine's link is a portLink, a link.Link decorator over the UDP link:
// it taps both directions into a capture (--pcap) with the daemon's clock,
// and it can replace the UDP link underneath (new faults at run time, when
// the UDP link cannot change its own; see setFaults) without the engine
// noticing. Its cost without a capture is one read lock and an atomic load
// per batch.
//
// # Several daemons
//
// Each daemon owns its device name; its attach socket, control socket and
// sysfs tree are derived from the name under one run directory (Paths).
// Start refuses a name whose sockets answer (ErrInUse) rather than taking
// them over.
package daemon
