package driver

import (
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// HW is the hardware interface: everything the driver reaches the device
// through, exactly as irdma reaches an E810 through BAR0 (readl/writel),
// dma_alloc_coherent memory and MSI-X interrupts. *device.Device satisfies
// it; the driver never sees a device-model struct (docs/architecture.md,
// "The driver half").
type HW interface {
	// Read32 reads the BAR0 register at off (readl).
	Read32(off regs.Offset) uint32
	// Write32 writes the BAR0 register at off (writel).
	Write32(off regs.Offset, v uint32)
	// Mem is the bus the device reaches host memory through; Mem().Alloc
	// is the driver's dma_alloc_coherent.
	Mem() *hostmem.Memory
	// MSIX returns the channel on which MSI-X vector i is signalled (one
	// receive per interrupt; interrupts coalesce). A nil channel means the
	// vector does not exist; a closed channel means the device is gone.
	MSIX(vector int) <-chan struct{}
}
