package daemon

import "github.com/irdma-emu/irdma-emu/cm"

// cmManager is the device's IBTA CM for the RDMA CM to drive (cm.go).
func cmManager(d *Daemon) *cm.Manager { return d.CM() }
