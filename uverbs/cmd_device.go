package uverbs

import (
	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
)

// getContext is uverbs_cmd.c:ib_uverbs_get_context with irdma's
// alloc_ucontext (verbs.c:irdma_alloc_ucontext): the async event file, the
// response {async_fd, num_comp_vectors}, then irdma_alloc_ucontext_resp
// with the GEN_2 uk_attrs and the doorbell page's mmap key.
func (s *Session) getContext(a *bundle) error {
	if _, err := a.request(szGetContext); err != nil {
		return err
	}
	// ib_init_ucontext: one context per file.
	if s.uctx != nil {
		return eINVAL
	}
	// irdma_alloc_ucontext
	if len(a.udIn) < szUctxReqMin || a.udOutLen < szUctxRespMin {
		return eINVAL
	}
	req := a.udata(szUctxReq)
	ver := uint32(get8(req, 4))
	compMask := get64(req, 8)
	// GEN_1 legacy support with libi40iw: a response of exactly the
	// minimal length (driver.AllocUContext refuses it on GEN_2).
	legacy := a.udOutLen == szUctxRespMin
	uctx, ur, err := s.p.d.AllocUContext(ver, legacy)
	if err != nil {
		if err == eINVAL {
			s.log.Warn("uverbs: invalid userspace driver version", zap.Uint32("version", ver),
				zap.Int("want", irdmaABIVer))
		}
		return err
	}
	fail := func(err error) error {
		_ = s.p.d.DeallocUContext(uctx)
		return err
	}
	// A GEN_3 device runs a kernel with GEN_3 support: it refuses a
	// provider that cannot write the GEN_3 WQE format (libirdma 44, which
	// then fails ibv_open_device), and it answers max_hw_srq_quanta.
	// GEN_2 answers as the kernels an E810 runs today.
	gen3 := ur.HWRev >= hwRevGen3
	if gen3 && compMask&uctxWQEFormatV2 == 0 {
		return fail(eOPNOTSUPP)
	}
	db, err := newDoorbellPage()
	if err != nil {
		return fail(eNOMEM)
	}
	ef, prog, err := newEventFile(szAsyncEventDesc, "uverbs-async-event")
	if err != nil {
		db.close()
		return fail(eMFILE)
	}
	resp := make([]byte, szGetContextResp)
	put32(resp, 0, 0) // async_fd: patched in by the client
	put32(resp, 4, uint32(s.p.d.NumCompVectors()))
	a.respond(resp)
	a.fds = append(a.fds, attach.FD{File: prog, Offset: 0})

	u := make([]byte, szUctxResp)
	put8(u, 12, irdmaABIVer) // kernel_ver
	put64(u, 16, ur.FeatureFlags)
	put64(u, 24, dbMmapKey)
	put32(u, 32, ur.MaxHWWQFrags)
	put32(u, 36, ur.MaxHWReadSGEs)
	put32(u, 40, ur.MaxHWInline)
	put32(u, 44, ur.MaxHWRQQuanta)
	put32(u, 48, ur.MaxHWWQQuanta)
	put32(u, 52, ur.MinHWCQSize)
	put32(u, 56, ur.MaxHWCQSize)
	put16(u, 60, uint16(ur.MaxHWSQChunk))
	put8(u, 62, uint8(ur.HWRev))
	if gen3 {
		put64(u, 64, uctxUseRawAttr|uctxMinHWWQSize|uctxMaxHWSRQQuanta)
		put32(u, 76, ur.MaxHWSRQQuanta)
	} else {
		put64(u, 64, uctxUseRawAttr|uctxMinHWWQSize)
	}
	put16(u, 72, uint16(ur.MinHWWQSize))
	a.udataOut(u)

	s.uctx = uctx
	s.rawAttrs = compMask&uctxUseRawAttr != 0
	s.dbPage = db
	s.db.Store(db)
	s.async.Store(ef)
	s.log.Debug("uverbs: context", zap.Uint32("userspace_ver", ver), zap.Bool("raw_attrs", s.rawAttrs))
	return nil
}

// requireContext is ib_uverbs_get_ucontext: commands on a file without a
// context fail with -EINVAL.
func (s *Session) requireContext() error {
	if s.uctx == nil {
		return eINVAL
	}
	return nil
}

// putDeviceAttr is uverbs_cmd.c:copy_query_dev_fields.
func (s *Session) putDeviceAttr(b []byte, at driver.DeviceAttr) {
	put64(b, 0, at.FWVer)
	copy(b[8:16], at.NodeGUID[:])
	copy(b[16:24], at.SysImageGUID[:])
	put64(b, 24, at.MaxMRSize)
	put64(b, 32, at.PageSizeCap)
	put32(b, 40, at.VendorID)
	put32(b, 44, at.VendorPartID)
	put32(b, 48, at.HWVer)
	put32(b, 52, at.MaxQP)
	put32(b, 56, at.MaxQPWR)
	put32(b, 60, uint32(at.DeviceCapFlags)) // lower_32_bits
	put32(b, 64, min(at.MaxSendSGE, at.MaxRecvSGE))
	put32(b, 68, at.MaxSGERd)
	put32(b, 72, at.MaxCQ)
	put32(b, 76, at.MaxCQE)
	put32(b, 80, at.MaxMR)
	put32(b, 84, at.MaxPD)
	put32(b, 88, at.MaxQPRdAtom)
	// max_ee_rd_atom, max_res_rd_atom: 0
	put32(b, 100, at.MaxQPInitRdAtom)
	// max_ee_init_rd_atom: 0
	put32(b, 108, uint32(at.AtomicCap))
	// max_ee, max_rdd: 0
	put32(b, 120, at.MaxMW)
	// max_raw_ipv6_qp, max_raw_ethy_qp: 0
	put32(b, 132, at.MaxMcastGrp)
	put32(b, 136, at.MaxMcastQPAttach)
	put32(b, 140, at.MaxTotalMcastQPAttach)
	put32(b, 144, at.MaxAH)
	// max_fmr, max_map_per_fmr: 0
	put32(b, 156, at.MaxSRQ)
	put32(b, 160, at.MaxSRQWR)
	put32(b, 164, at.MaxSRQSGE)
	put16(b, 168, at.MaxPKeys)
	// local_ca_ack_delay: 0
	put8(b, 171, at.PhysPortCnt)
}

// queryDevice is ib_uverbs_query_device: ib_device.attrs as cached when
// the device registered (not a new query).
func (s *Session) queryDevice(a *bundle) error {
	if err := s.requireContext(); err != nil {
		return err
	}
	if _, err := a.request(szQueryDevice); err != nil {
		return err
	}
	resp := make([]byte, szQueryDeviceResp)
	s.putDeviceAttr(resp, s.p.regAtt)
	a.respond(resp)
	return nil
}

// exQueryDevice is ib_uverbs_ex_query_device over irdma_query_device,
// which refuses provider data (-EINVAL).
func (s *Session) exQueryDevice(a *bundle) error {
	if err := s.requireContext(); err != nil {
		return err
	}
	req, err := a.request(szExQueryDevice)
	if err != nil {
		return err
	}
	if get32(req, 0) != 0 || get32(req, 4) != 0 { // comp_mask, reserved
		return eINVAL
	}
	if len(a.udIn) != 0 || a.udOutLen != 0 {
		return eINVAL
	}
	at, err := s.p.d.QueryDevice()
	if err != nil {
		return err
	}
	resp := make([]byte, szExQueryDeviceResp)
	s.putDeviceAttr(resp, at)
	put32(resp, 180, a.responseLength(szExQueryDeviceResp))
	// odp_caps, rss, tm, cq moderation, dm: 0 on irdma; hca_core_clock
	// only on GEN_3.
	put64(resp, 208, at.TimestampMask)
	put64(resp, 216, at.HCACoreClock)
	put64(resp, 224, at.DeviceCapFlags) // device_cap_flags_ex
	a.respond(resp)
	return nil
}

// queryPort is ib_uverbs_query_port: ib_query_port (irdma_query_port)
// and copy_port_attr_to_resp — port_cap_flags with IP_BASED_GIDS for
// ip_gids, the link layer Ethernet, the speed capped at NDR.
func (s *Session) queryPort(a *bundle) error {
	if err := s.requireContext(); err != nil {
		return err
	}
	req, err := a.request(szQueryPort)
	if err != nil {
		return err
	}
	pa, err := s.p.d.QueryPort(get8(req, 8))
	if err != nil {
		return err
	}
	resp := make([]byte, szQueryPortResp)
	flags := pa.PortCapFlags &^ ibPCFIPBasedGIDs // make_port_cap_flags
	if pa.IPGIDs {
		flags |= ibPCFIPBasedGIDs
	}
	put32(resp, 0, flags)
	put32(resp, 4, pa.MaxMsgSz)
	// bad_pkey_cntr, qkey_viol_cntr: 0
	put32(resp, 16, pa.GIDTblLen)
	put16(resp, 20, pa.PKeyTblLen)
	put16(resp, 22, pa.LID)
	// sm_lid: 0
	put8(resp, 26, pa.State)
	put8(resp, 27, uint8(pa.MaxMTU))
	put8(resp, 28, uint8(pa.ActiveMTU))
	// lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply: 0
	put8(resp, 34, pa.ActiveWidth)
	put8(resp, 35, uint8(min(pa.ActiveSpeed, ibSpeedNDR)))
	put8(resp, 36, pa.PhysState)
	put8(resp, 37, linkLayerEth)
	// flags: no GRH_REQUIRED (irdma's core_cap_flags)
	a.respond(resp)
	return nil
}
