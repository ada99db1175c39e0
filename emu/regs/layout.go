package regs

// Layout is the register map as the driver sees it: the BAR0 offsets irdma
// keeps in dev->hw_regs[], indexed by irdma.h enum irdma_registers, plus the
// other fixed registers it uses. The offsets differ between generations
// (GEN_1 i40iw_hw.h has its own table; GEN_3 obtains them from the control
// plane over virtchnl), so the driver half reads them from its profile
// rather than from the constants of this package, exactly as irdma does.
type Layout struct {
	CQPTAIL        Offset
	CQPDB          Offset
	CCQPSTATUS     Offset
	CCQPHIGH       Offset
	CCQPLOW        Offset
	CQARM          Offset
	CQACK          Offset
	AEQALLOC       Offset
	CQPERRCODES    Offset
	WQEALLOC       Offset
	GLINT_DYN_CTL  Offset // vector 0; vector i at +4·i
	DB_ADDR_OFFSET Offset // user doorbell page

	GLPCI_LBARCTRL  Offset
	GLPE_CPUSTATUS0 Offset
	GLPE_CPUSTATUS1 Offset
	GLPE_CPUSTATUS2 Offset
	PFINT_AEQCTL    Offset
	GLINT_CEQCTL    Offset // CEQ 0; CEQ i at +4·i
	VSIQF_PE_CTL1   Offset // VSI 0; VSI i at +4·i
	PFHMC_PDINV     Offset
	GLHMC_VFPDINV   Offset // VF 0; VF i at +4·i
	GLPE_CRITERR    Offset
	GLINT_RATE      Offset // vector 0; vector i at +4·i
}

// GEN2Layout returns the GEN_2 PF layout (icrdma_hw.h, icrdma_init_hw), the
// one File implements.
func GEN2Layout() Layout {
	return Layout{
		CQPTAIL:        CQPTAIL,
		CQPDB:          CQPDB,
		CCQPSTATUS:     CCQPSTATUS,
		CCQPHIGH:       CCQPHIGH,
		CCQPLOW:        CCQPLOW,
		CQARM:          CQARM,
		CQACK:          CQACK,
		AEQALLOC:       AEQALLOC,
		CQPERRCODES:    CQPERRCODES,
		WQEALLOC:       WQEALLOC,
		GLINT_DYN_CTL:  GLINT_DYN_CTL(0),
		DB_ADDR_OFFSET: DB_ADDR_OFFSET,

		GLPCI_LBARCTRL:  GLPCI_LBARCTRL,
		GLPE_CPUSTATUS0: GLPE_CPUSTATUS0,
		GLPE_CPUSTATUS1: GLPE_CPUSTATUS1,
		GLPE_CPUSTATUS2: GLPE_CPUSTATUS2,
		PFINT_AEQCTL:    PFINT_AEQCTL,
		GLINT_CEQCTL:    GLINT_CEQCTL(0),
		VSIQF_PE_CTL1:   VSIQF_PE_CTL1(0),
		PFHMC_PDINV:     PFHMC_PDINV,
		GLHMC_VFPDINV:   GLHMC_VFPDINV(0),
		GLPE_CRITERR:    GLPE_CRITERR,
		GLINT_RATE:      GLINT_RATE(0),
	}
}
